"""What a platform's webhook server needs of the port (Slack's HTTP mode, WhatsApp's Callback
URL): a body read no further than its cap, and aiohttp's server log turned quiet (what
anonymous senders cause is a DEBUG line, without a traceback; the handler logs its own)."""

from __future__ import annotations

import logging
from typing import Protocol


class Body(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


async def read_at_most(content: Body, limit: int) -> bytes | None:
    """The body, or None as soon as it passes ``limit`` bytes (no more than ``limit + 1`` are read)."""
    body = bytearray()
    while chunk := await content.read(limit + 1 - len(body)):
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


class QuietLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server log for a webhook: its errors as DEBUG lines, without a traceback."""

    def exception(self, msg: object, *args: object, exc_info: object = True, **kwargs: object) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else None
        self.debug("%s: %s", str(msg) % args if args else msg, error or "")
