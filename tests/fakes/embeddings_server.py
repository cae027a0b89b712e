"""A fake OpenAI-compatible ``/v1/embeddings`` on 127.0.0.1 with deterministic vectors.

A text's vector is its bag of concepts: each word is mapped to its concept (``SYNONYMS``: a few
words that mean the same, so a paraphrase lands near the original), each concept hashed to one
of ``dimensions`` axes, and the sum normalised. Words that mean nothing alike are far apart, so a
search by meaning finds a paraphrase that shares no word with the note.

    async with FakeEmbeddings() as fake:
        ... base_url fake.base_url ...; fake.inputs: every text embedded; fake.fail = 503
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from aiohttp import web

from tests.fakes.serving import serve

SYNONYMS = {
    "celebration": "party", "festivity": "party", "bash": "party", "gathering": "party",
    "place": "venue", "location": "venue", "hall": "venue", "where": "venue", "held": "venue",
    "novel": "book", "read": "book", "reading": "book",
    "want": "wish", "wanted": "wish", "like": "wish", "love": "wish",
    "pet": "animal", "dog": "animal", "cat": "animal", "puppy": "animal",
    "spring": "march", "march": "march",
}
STOP = frozenset("a an and are at be for i in is it of on the this to was we what which will with my".split())


def vector(text: str, dimensions: int) -> list[float]:
    v = [0.0] * dimensions
    for word in re.findall(r"\w+", text.casefold()):
        if word in STOP:
            continue
        concept = SYNONYMS.get(word, word)
        axis = int.from_bytes(hashlib.sha256(concept.encode()).digest()[:4], "big") % dimensions
        v[axis] += 1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


class FakeEmbeddings:
    def __init__(self, *, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.inputs: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.fail: int | None = None  # answer this HTTP status instead
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeEmbeddings:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner, self.port = await serve(app, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append({"body": body, "authorization": request.headers.get("Authorization")})
        if self.fail is not None:
            return web.json_response({"error": {"message": "down"}}, status=self.fail)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.inputs += texts
        dims = int(body.get("dimensions") or self.dimensions)
        data = [{"object": "embedding", "index": i, "embedding": vector(t, dims)} for i, t in enumerate(texts)]
        tokens = sum(len(t.split()) for t in texts)
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
