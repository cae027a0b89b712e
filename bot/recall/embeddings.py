"""An OpenAI-compatible ``/embeddings`` client (OpenAI's, or a local server's through ``base_url``).

Texts go in batches; each call's tokens are reported so that the caller charges them to the
person (``bot.recall.memory``). A failure is an ``EmbeddingError`` with one sentence, never the
key: memory search then falls back to its words.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import aiohttp

from bot.errors import ChatgateError
from bot.recall.config import EmbeddingsConfig

log = logging.getLogger(__name__)

BATCH = 64  # texts per request
MAX_TEXT_CHARS = 8000  # a passage is cut well below this; a query too


class EmbeddingError(ChatgateError):
    """The embeddings endpoint could not be used now (said in one sentence)."""


class Embeddings:
    """One HTTP session; ``aclose`` closes it."""

    def __init__(self, config: EmbeddingsConfig) -> None:
        self.model = config.model
        self.dimensions = config.dimensions
        self.cost_per_token = config.cost_per_million / 1_000_000
        self._url = config.base_url.rstrip("/") + "/embeddings"
        key = config.api_key.get_secret_value() if config.api_key is not None else ""
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._timeout = aiohttp.ClientTimeout(total=config.timeout)
        self._session: aiohttp.ClientSession | None = None

    @property
    def name(self) -> str:
        """The model and dimensions: what a stored vector was made by."""
        return f"{self.model}@{self.dimensions or 'default'}"

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """The vectors of ``texts``, in order, and the tokens the endpoint counted."""
        vectors: list[list[float]] = []
        tokens = 0
        for start in range(0, len(texts), BATCH):
            found, used = await self._call([t[:MAX_TEXT_CHARS] for t in texts[start:start + BATCH]])
            vectors += found
            tokens += used
        return vectors, tokens

    async def _call(self, texts: list[str]) -> tuple[list[list[float]], int]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        try:
            async with self._session.post(self._url, json=body, headers=self._headers) as response:
                if response.status != 200:
                    raise EmbeddingError(f"the embeddings endpoint answered HTTP {response.status}")
                data = await response.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EmbeddingError(f"the embeddings endpoint cannot be reached ({type(exc).__name__})") from None
        try:
            items = sorted(data["data"], key=lambda item: int(item["index"]))
            vectors = [[float(x) for x in item["embedding"]] for item in items]
            usage = data.get("usage") or {}
            tokens = int(usage.get("total_tokens") or usage.get("prompt_tokens") or 0)
        except (KeyError, TypeError, ValueError):
            raise EmbeddingError("the embeddings endpoint answered something that is not embeddings") from None
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) > 1:
            raise EmbeddingError("the embeddings endpoint answered the wrong number of vectors")
        return vectors, tokens
