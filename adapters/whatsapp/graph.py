"""A thin client of the Cloud API on aiohttp: one attempt per call, failures as ``SendFailed``.

``POST /<version>/<phone_number_id>/messages`` sends everything (text, media, interactive
questions, templates, reactions, and the read receipt with its typing indicator);
``POST .../media`` uploads a file; ``GET /<version>/<media id>`` gives a received file's
short-lived URL, downloaded with the token. Errors come as ``{"error": {"code", "message",
"error_data": {"details"}}}``: ``failure`` decides what delivery does with them (``permanent``:
given up; else retried, after ``retry_after`` for rate limits). A refused token (190, HTTP
401) is ``Refused``: the channel stops on it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from bot.channels import SendFailed

RATE_LIMITED = {4, 80007, 130429, 131056}  # app, account, throughput, pair (one person, too many at once)
RETRYABLE = {1, 2, 131000, 131016, 133004}  # unknown, service unavailable, server temporarily unavailable
TOKEN = {190, 10}  # the access token expired or was revoked; a permission it lacks
OUTSIDE_WINDOW = 131047  # re-engagement: more than 24 hours since the person last wrote
TIMEOUT = aiohttp.ClientTimeout(total=60, connect=10)


class Refused(SendFailed):
    """Meta refused the access token (stops the channel; the send stays owed)."""


def failure(status: int, body: Any, what: str, retry_after: str | None = None) -> SendFailed:
    """The ``SendFailed`` for an error answer to ``what``."""
    error: dict[str, Any] = body["error"] if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
    code = error.get("code") if isinstance(error.get("code"), int) else 0
    details = (error.get("error_data") or {}).get("details") if isinstance(error.get("error_data"), dict) else None
    detail = f"{what}: HTTP {status}, error {code}: {error.get('message') or 'no message'}"
    if details:
        detail += f" ({details})"
    if code in TOKEN or status == 401:
        return Refused(detail)
    if code in RATE_LIMITED or status == 429:
        wait = float(retry_after) if retry_after and retry_after.replace(".", "", 1).isdigit() else 5.0
        return SendFailed(detail, retry_after=wait)
    if code in RETRYABLE or status >= 500:
        return SendFailed(detail)
    return SendFailed(detail, permanent=True)


class Graph:
    def __init__(self, base_url: str, version: str, phone_number_id: str, token: str) -> None:
        self.root = f"{base_url.rstrip('/')}/{version}"
        self.phone_number_id = phone_number_id
        self._headers = {"Authorization": f"Bearer {token}"}
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        self._session = aiohttp.ClientSession(timeout=TIMEOUT, headers=self._headers)

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "open() first"
        return self._session

    async def _call(self, method: str, url: str, what: str, **kwargs: Any) -> dict[str, Any]:
        try:
            async with self.session.request(method, url, **kwargs) as resp:
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    body = None
                if resp.status != 200 or not isinstance(body, dict) or "error" in body:
                    raise failure(resp.status, body, what, resp.headers.get("Retry-After"))
                return body
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise SendFailed(f"{what}: {type(exc).__name__}: {exc}") from None

    async def phone_number(self) -> dict[str, Any]:
        """The business number's own record (checks the token and the id at start)."""
        return await self._call("GET", f"{self.root}/{self.phone_number_id}", "phone number",
                                params={"fields": "display_phone_number,verified_name"})

    async def message(self, payload: dict[str, Any], what: str = "messages") -> dict[str, Any]:
        body = {"messaging_product": "whatsapp", **payload}
        return await self._call("POST", f"{self.root}/{self.phone_number_id}/messages", what, json=body)

    async def send(self, to: str, payload: dict[str, Any], what: str = "messages") -> str:
        """Send one message to ``to``; its ``wamid``."""
        sent = await self.message({"recipient_type": "individual", "to": to, **payload}, what)
        messages = sent.get("messages")
        if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
            raise SendFailed(f"{what}: WhatsApp answered without a message id")
        return str(messages[0].get("id") or "")

    async def upload(self, name: str, data: bytes, mime: str) -> str:
        """Upload a file for sending; its media id."""
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        form.add_field("file", data, filename=name, content_type=mime)
        found = await self._call("POST", f"{self.root}/{self.phone_number_id}/media", "media upload", data=form)
        if not found.get("id"):
            raise SendFailed("media upload: WhatsApp answered without a media id")
        return str(found["id"])

    async def media(self, media_id: str) -> dict[str, Any]:
        """A received file's record: ``url`` (short-lived), ``mime_type``, ``file_size``."""
        return await self._call("GET", f"{self.root}/{media_id}", "media lookup")

    async def download(self, url: str, limit: int, name: str) -> bytes:
        """The file at ``url`` (with the token), at most ``limit`` bytes."""
        try:
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=120)) as resp:
                if resp.status != 200:
                    raise SendFailed(f"{name}: download HTTP {resp.status}", permanent=400 <= resp.status < 500
                                     and resp.status != 429)
                data = bytearray()
                async for piece in resp.content.iter_chunked(64 * 1024):
                    data += piece
                    if len(data) > limit:
                        raise SendFailed(f"{name}: over the {limit} byte limit", permanent=True)
                return bytes(data)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise SendFailed(f"{name}: download failed: {type(exc).__name__}: {exc}") from None
