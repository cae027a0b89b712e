"""``memory:``, the config section of recall: embeddings (memory by meaning) and auto-recall."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field

from bot.config.types import CapabilitySection, Float, Int, Name, Secret, Section, Url
from bot.config.types import secret as _secret


class EmbeddingsConfig(Section):
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, or a local server through ``base_url``);
    ``api_key`` null reads OPENAI_API_KEY, and a local server needs none. Off by default: memory is
    then searched by its words only (BM25)."""

    enabled: bool = False
    provider: Literal["openai"] = "openai"  # the OpenAI embeddings API, or any server speaking it
    model: Name = "text-embedding-3-small"
    base_url: Url = "https://api.openai.com/v1"
    api_key: Secret = _secret("OPENAI_API_KEY")
    dimensions: Annotated[Int, Field(ge=8, le=8192)] | None = None  # None: the model's own
    timeout: Annotated[Float, Field(gt=0)] = 60.0
    cost_per_million: Annotated[Float, Field(ge=0)] = 0.02  # USD per million input tokens, charged to the person

    def needs_key(self) -> bool:
        return self.enabled and urlsplit(self.base_url).hostname == "api.openai.com"


class RecallConfig(CapabilitySection):
    """Search of past conversations (``history_search``, ``/search``: always on), memory by meaning
    (``embeddings``) and passages recalled into a turn before it is answered (``auto_recall``)."""

    embeddings: EmbeddingsConfig = EmbeddingsConfig()
    auto_recall: Annotated[Int, Field(ge=0, le=20)] = 0  # 0: off; else how many passages at most
    auto_recall_tokens: Annotated[Int, Field(ge=50, le=8000)] = 600  # what recalled passages may take in a turn

    def required_secrets(self) -> tuple[tuple[str, ...], ...]:
        return (("memory", "embeddings", "api_key"),) if self.embeddings.needs_key() else ()

    def describe(self) -> list[str]:
        from bot.tracing import mask_url

        e = self.embeddings
        meaning = (f"by meaning with {e.model} at {mask_url(e.base_url)}" + (f" ({e.dimensions} dims)" if e.dimensions
                   else "")) if e.enabled else "by words only (memory.embeddings off)"
        recall = f"; {self.auto_recall} passages recalled per turn" if self.auto_recall else ""
        return [f"memory     history_search on; memory searched {meaning}{recall}"]
