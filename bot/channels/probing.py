"""One HTTP request of a platform's live check (``ChannelSetup.probe``): the status and the JSON
body, or ``ChannelError`` naming the key of the server that could not be reached.

A probe calls its platform once or twice with the tokens just typed, so every failure is
worded for the person at the keyboard; the URL is never shown (Telegram's holds the token).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.errors import ChannelError

TIMEOUT = 15.0  # seconds for one request of a live check


async def http_json(method: str, url: str, *, key: str, shown: str, headers: dict[str, str] | None = None,
                    timeout: float = TIMEOUT, **kwargs: Any) -> tuple[int, Any]:
    """``(status, body)``; ``body`` is None when it is not JSON. ``key`` names the server's
    config key and ``shown`` its root, for the line said when it cannot be reached."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.request(method, url, headers=headers, **kwargs) as resp:
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    body = None
                return resp.status, body
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        os_error = getattr(exc, "os_error", None)  # a refused or unresolvable host: the OS's words
        why = ("no answer in time" if isinstance(exc, asyncio.TimeoutError)
               else getattr(os_error, "strerror", None) or type(exc).__name__)
        raise ChannelError(f"{key}: cannot reach {shown} ({why})") from None
