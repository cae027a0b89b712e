"""The webhook endpoint: Meta's verification handshake, and only signed posts reach the channel.

``GET <path>``: the subscription handshake. Meta sends ``hub.mode=subscribe``,
``hub.verify_token`` (ours, compared in constant time) and ``hub.challenge``, which is
echoed; anything else is 403.

``POST <path>``: before anything is parsed, ``X-Hub-Signature-256`` must be ``sha256=`` and
the HMAC-SHA256 of the raw body under the app secret (constant time). A post without
one is refused (401) before its body is read; a body over ``MAX_BODY`` is refused (413) from
its Content-Length or, sent chunked, once that many bytes came; one still coming after
``READ_TIME`` is refused (408). Refusals are DEBUG lines, since anyone can cause one.

A signed body goes to ``take`` and is answered 200 only once ``take`` returned (the channel
stores every message in it first); if it raises, 500, and Meta sends the body again (it
retries for up to seven days). ``MAX_BODY``: Meta batches at most a few messages per post,
each at most 4,096 characters of text (or a caption of 1,024); 1 MiB keeps a wide margin.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.channels.webhooks import QuietLog, Refused, read_capped

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
READ_TIME = 10.0
SIGNATURE = "X-Hub-Signature-256"
Take = Callable[[dict[str, Any]], Awaitable[None]]


def well_formed(signature: str | None) -> bool:
    """``sha256=`` and 64 hex digits."""
    return signature is not None and len(signature) == 71 and signature.startswith("sha256=") and \
        all(c in "0123456789abcdef" for c in signature[7:])


def sign(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` of ``body`` (what Meta sends; the fake uses it too)."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def signed(secret: bytes, body: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(secret, body).encode(), signature.encode())


def same(sent: str | None, secret: str) -> bool:
    """A token someone sent against ours, in constant time (on bytes: any header or query text)."""
    return sent is not None and hmac.compare_digest(sent.encode("utf-8", "replace"), secret.encode("utf-8"))


def runner(take: Take, *, app_secret: str, verify_token: str, path: str, max_body: int = MAX_BODY,
           read_time: float = READ_TIME) -> web.AppRunner:
    """The aiohttp runner of the Callback URL ``path`` (set it up, then bind it)."""
    app = web.Application(client_max_size=max_body)
    app.router.add_get(path, handshake(verify_token))
    app.router.add_post(path, handler(take, app_secret, max_body=max_body, read_time=read_time))
    return web.AppRunner(app, access_log=None, shutdown_timeout=1.0, lingering_time=1.0, auto_decompress=False,
                         logger=QuietLog(logging.getLogger(f"{__name__}.server")))


def handshake(verify_token: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        query = request.query
        if query.get("hub.mode") == "subscribe" and same(query.get("hub.verify_token"), verify_token):
            log.info("whatsapp: Meta verified the webhook")
            return web.Response(text=query.get("hub.challenge", ""))
        log.debug("whatsapp: refused a verification from %s", request.remote)
        return web.Response(status=403)

    return handle


def handler(take: Take, app_secret: str, *, max_body: int = MAX_BODY,
            read_time: float = READ_TIME) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    secret = app_secret.encode()

    def refuse(request: web.Request, status: int, why: str) -> web.Response:
        log.debug("whatsapp: refused a post from %s (%s): %s", request.remote, status, why)
        return web.Response(status=status)

    async def handle(request: web.Request) -> web.StreamResponse:
        signature = request.headers.get(SIGNATURE)
        if not well_formed(signature):
            return refuse(request, 401, "no sha256 signature")
        body = await read_capped(request, max_body, read_time)
        if isinstance(body, Refused):
            return refuse(request, body.status, body.why)
        assert signature is not None
        if not signed(secret, body, signature):
            return refuse(request, 401, "wrong signature")
        try:
            payload = json.loads(body)
        except ValueError:
            log.warning("whatsapp: a signed post was not JSON")
            return web.Response(status=400)
        if not isinstance(payload, dict):
            return web.Response(status=400)
        try:
            await take(payload)
        except Exception as exc:  # not stored: Meta sends it again
            log.warning("whatsapp: a webhook could not be stored (%s); Meta will send it again", exc)
            return web.Response(status=500)
        return web.Response(status=200)

    return handle
