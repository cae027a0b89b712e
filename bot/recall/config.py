"""``memory:``, the config section of recall: embeddings (memory by meaning) and auto-recall."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field

from bot.config.types import CapabilitySection, Float, Int, Name, Secret, Section, Url
from bot.config.types import secret as _secret


class EmbeddingsConfig(Section):
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, or a local server through ``base_url``);
    ``api_key`` null reads OPENAI_API_KEY, and a local server needs none. Off by default: memory is
    then searched by its words only (BM25)."""

    enabled: bool = Field(default=False, description="true: MEMORY.md and memory/*.md are embedded (each passage "
        "once) and memory_search ranks by words and by meaning")
    provider: Literal["openai"] = Field(default="openai", description="the OpenAI embeddings API, or any server "
        "speaking it (base_url)")
    model: Name = Field(default="text-embedding-3-small", description="the endpoint's embedding model")
    base_url: Url = Field(default="https://api.openai.com/v1", description="e.g. http://localhost:11434/v1 for a "
        "local server")
    api_key: Secret = _secret("OPENAI_API_KEY", description="needed for api.openai.com only")
    dimensions: Annotated[Int, Field(ge=8, le=8192)] | None = Field(default=None, description="null: the model's "
        "own; e.g. 512 for smaller vectors")
    timeout: Annotated[Float, Field(gt=0)] = Field(default=60.0, description="seconds for one embeddings request; "
        "on failure, search by words")
    cost_per_million: Annotated[Float, Field(ge=0)] = Field(default=0.02, description="USD per million tokens "
        "embedded, charged to the person (budgets)")

    def needs_key(self) -> bool:
        return self.enabled and urlsplit(self.base_url).hostname == "api.openai.com"


class RecallConfig(CapabilitySection):
    """Search of past conversations (``history_search``, ``/search``: always on), memory by meaning
    (``embeddings``) and passages recalled into a turn before it is answered (``auto_recall``)."""

    model_config = ConfigDict(json_schema_extra={"description": (
        "recall (docs/guide/memory-and-recall.md); history_search and /search are always on")})

    embeddings: EmbeddingsConfig = Field(default=EmbeddingsConfig(), description="memory searched by meaning too "
        "(off: by words only, /status says so)")
    auto_recall: Annotated[Int, Field(ge=0, le=20)] = Field(default=0, description="0: off; else at most this many "
        "memory passages put into each turn of people's messages, marked as recalled, with their source")
    auto_recall_tokens: Annotated[Int, Field(ge=50, le=8000)] = Field(default=600, description="what the recalled "
        "passages may take of a turn")

    def required_secrets(self) -> tuple[tuple[str, ...], ...]:
        return (("memory", "embeddings", "api_key"),) if self.embeddings.needs_key() else ()

    def describe(self) -> list[str]:
        from bot.tracing import mask_url

        e = self.embeddings
        meaning = (f"by meaning with {e.model} at {mask_url(e.base_url)}" + (f" ({e.dimensions} dims)" if e.dimensions
                   else "")) if e.enabled else "by words only (memory.embeddings off)"
        recall = f"; {self.auto_recall} passages recalled per turn" if self.auto_recall else ""
        return [f"memory     history_search on; memory searched {meaning}{recall}"]
