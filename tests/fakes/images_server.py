"""A fake OpenAI images endpoint (``POST /v1/images/generations``) on 127.0.0.1.

It answers with a small PNG (base64) and records each request; a prompt with ``refuse`` is
refused as OpenAI's safety system refuses (400, ``moderation_blocked``); a prompt with
``slow`` never answers (``slow_gone`` is set when the client goes away)."""

from __future__ import annotations

import asyncio
import base64
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


def tiny_png() -> bytes:
    """A 1x1 red PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = zlib.compress(b"\x00\xff\x00\x00")
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", raw) + chunk(b"IEND", b""))


PNG = tiny_png()


@dataclass
class FakeImages:
    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    slow_gone: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _generate(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append({**body, "authorization": request.headers.get("Authorization")})
        prompt = str(body.get("prompt", ""))
        if "refuse" in prompt:
            return web.json_response({"error": {
                "message": "Your request was rejected by the safety system. It may contain content that is not "
                           "allowed.", "type": "image_generation_user_error", "code": "moderation_blocked"}},
                status=400)
        if "slow" in prompt:
            try:
                while request.transport is not None and not request.transport.is_closing():
                    await asyncio.sleep(0.02)  # until the client goes away
            finally:
                self.slow_gone.set()
        return web.json_response({"created": 1, "data": [{"b64_json": base64.b64encode(PNG).decode()}]})


@asynccontextmanager
async def serving() -> AsyncIterator[FakeImages]:
    fake = FakeImages()
    app = web.Application()
    app.router.add_post("/v1/images/generations", fake._generate)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield fake
    finally:
        await runner.cleanup()
