"""What a platform's webhook server needs of the port (Slack's HTTP mode, WhatsApp's Callback
URL): a body read no further than its cap and within its time (``read_capped``: the refusal,
as the status to answer and why, when it is not), and aiohttp's server log turned quiet (what
anonymous senders cause is a DEBUG line, without a traceback; the handler logs its own)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web


@dataclass(frozen=True, slots=True)
class Refused:
    status: int  # 413 too big, 408 too slow, 400 broken off
    why: str


async def read_capped(request: web.Request, max_body: int, read_time: float) -> bytes | Refused:
    """The request's body, or why it is refused: over ``max_body`` bytes (as announced, or as
    read: no more than ``max_body + 1`` are), not arrived within ``read_time`` seconds, or
    broken off half way."""
    from aiohttp import web

    if request.content_length is not None and request.content_length > max_body:
        return Refused(413, f"{request.content_length} bytes")
    body = bytearray()
    try:
        async with asyncio.timeout(read_time):
            while chunk := await request.content.read(max_body + 1 - len(body)):
                body += chunk
                if len(body) > max_body:
                    return Refused(413, f"over {max_body} bytes")
    except TimeoutError:
        return Refused(408, f"the body took over {read_time:g} s")
    except (OSError, web.RequestPayloadError) as exc:  # gone half way, or a malformed chunk
        return Refused(400, f"the body broke off: {exc!r}")
    return bytes(body)


class QuietLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server log for a webhook: its errors as DEBUG lines, without a traceback."""

    def exception(self, msg: object, *args: object, exc_info: object = True, **kwargs: object) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else None
        self.debug("%s: %s", str(msg) % args if args else msg, error or "")
