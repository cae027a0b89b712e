"""A model server's HTTP interface as it is on the wire: a JSON body posted, server-sent events read.

That is all the chat providers need of an HTTP client. The vendors' SDKs cost the start more
than anything else (``import openai`` alone: ~0.35 s and 14 MB), and aiohttp is loaded anyway.
Kept from the SDKs: the key in the vendor's header, an error status raised with its body, an
event whose ``error`` is set raised inside the stream (OpenAI nests ``{"error": {...}}``,
Anthropic sends ``{"type": "error", "error": {...}}``), ``[DONE]`` ending the stream, timeouts
per connect and per read, and the environment's proxy, read once (aiohttp's ``trust_env`` would
read it, and ``~/.netrc``, in a thread at every request). After ``[DONE]`` the body is read to
its end so that the connection is used again. Retries, error classification and redaction are
the providers' (``bot.providers.retry``, ``bot.providers.failures``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp

from bot import __version__


class WireError(Exception):
    """A request that failed before or while its stream was read."""


class StatusError(WireError):
    """The server answered with an error status; ``body`` is its JSON (or text, or None)."""

    def __init__(self, status: int, body: object, headers: Mapping[str, str]) -> None:
        super().__init__(f"Error code: {status}")
        self.status, self.body, self.headers = status, body, headers


class StreamError(WireError):
    """An event inside the stream said the request failed; ``body`` is its ``error`` object
    (``message``, and ``code`` or ``type``)."""

    def __init__(self, body: object) -> None:
        message = body.get("message") if isinstance(body, dict) else None
        super().__init__(message if isinstance(message, str) and message else "An error occurred during streaming")
        self.body = body


class TimedOut(WireError):
    """No connection, or no byte of the answer, within the timeout."""


class Unreachable(WireError):
    """The connection failed or broke (its cause says how)."""


class Wire:
    """One server's HTTP client: its session is made on the first request (in the running loop)."""

    def __init__(self, base_url: str, auth: Mapping[str, str], timeout: float) -> None:
        self._base = base_url.rstrip("/")
        self._headers = {**auth, "Content-Type": "application/json", "Accept": "application/json",
                         "User-Agent": f"chatgate/{__version__}"}
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
        self._proxy = proxy_for(self._base)
        self._session: aiohttp.ClientSession | None = None

    @property
    def closed(self) -> bool:
        return self._session is None or self._session.closed

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def events(self, path: str, body: dict[str, Any]) -> Events:
        """POST ``body`` to ``path``; its stream of events once the server answered 2xx."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            response = await self._session.post(self._base + path, data=json.dumps(body).encode(),
                                                headers=self._headers, proxy=self._proxy)
            if response.status >= 400:
                async with response:
                    raise StatusError(response.status, _body(await response.text(errors="replace")),
                                      response.headers)
        except asyncio.TimeoutError as err:
            raise TimedOut("timed out") from err
        except aiohttp.ClientError as err:
            raise Unreachable("connection error") from err
        return Events(response)


def proxy_for(url: str) -> str | None:
    """The proxy ``HTTPS_PROXY`` / ``HTTP_PROXY`` name for ``url``, unless ``NO_PROXY`` spares its host."""
    parts = urlsplit(url)
    if parts.hostname is None or proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


def _body(text: str) -> object:
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        return text or None


class Events:
    """The server-sent events of one response, each ``data`` as parsed JSON; an async context
    manager that closes the response (on cancel, error or early exit: the connection goes, as
    the answer was not read to its end)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aenter__(self) -> Events:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._response.close()

    async def __aiter__(self) -> AsyncIterator[Any]:
        data: list[str] = []
        rest = b""
        try:
            async for piece in self._response.content.iter_any():
                if b"\n" not in piece:
                    rest += piece
                    continue
                *lines, rest = (rest + piece).split(b"\n")
                for line in lines:
                    if line := line.rstrip(b"\r"):
                        field, _, value = line.decode().partition(":")
                        if field == "data":  # event:, id:, retry: and comments are not read
                            data.append(value[1:] if value.startswith(" ") else value)
                        continue
                    if not data:
                        continue
                    text = "\n".join(data)
                    data.clear()
                    if text.startswith("[DONE]"):
                        async for _ in self._response.content.iter_any():  # to its end: the connection is kept
                            pass
                        return
                    item = json.loads(text)
                    if isinstance(item, dict) and item.get("error"):
                        raise StreamError(item["error"])
                    yield item
        except asyncio.TimeoutError as err:
            raise TimedOut("timed out") from err
        except aiohttp.ClientError as err:
            raise Unreachable("connection error") from err
