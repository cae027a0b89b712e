"""The Events API endpoint (``mode: http``): only a request Slack signed reaches bolt.

Before anything is parsed, the request's ``X-Slack-Request-Timestamp`` must be within five
minutes of now and its ``X-Slack-Signature`` the ``v0=`` HMAC-SHA256 of
``v0:<timestamp>:<raw body>`` under the signing secret (compared in constant time), as Slack
documents. A request without them is refused (401) before its body is read. A body over
``MAX_BODY`` is refused (413) from its Content-Length before it is read or, sent chunked,
once that many bytes came; one still coming after ``READ_TIME`` is refused (408). A body is
taken as it came: a compressed one is not inflated (Slack sends none; its signature would
not match). Refusals are DEBUG lines, since anyone can cause one, and so is what aiohttp
meets before our handler runs (a malformed request line, header or chunk).

``MAX_BODY``: Slack documents no largest request. Ours are message events (a text of at
most 40,000 characters, which comes twice, as ``text`` and as rich-text ``blocks``: with
non-Latin text escaped as ``\\uXXXX``, some 500 KB), slash commands, and the Stop button's
``block_actions`` (our own message of at most 4,000 characters, twice, form-encoded: under
100 KB). 1 MiB keeps a margin over the largest; it was 4 MB.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.channels.webhooks import QuietLog, Refused, read_capped

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024  # bytes of one request body
MAX_AGE = 300  # seconds a request's timestamp may be from now (Slack: five minutes)
READ_TIME = 10.0  # seconds a body may take to arrive (Slack sends it at once, and wants an answer in 3)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def fresh(timestamp: str | None, now: float) -> bool:
    """``X-Slack-Request-Timestamp`` is whole seconds within ``MAX_AGE`` of ``now``."""
    if not timestamp or not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return False
    return abs(now - int(timestamp)) <= MAX_AGE


def well_formed(signature: str | None) -> bool:
    """``X-Slack-Signature`` has the shape of a v0 signature (``v0=`` and 64 hex digits)."""
    return signature is not None and len(signature) == 67 and signature.startswith("v0=") and \
        all(c in "0123456789abcdef" for c in signature[3:])


def signed(secret: bytes, timestamp: str, body: bytes, signature: str) -> bool:
    """``signature`` is Slack's v0 signature of ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(f"v0={digest}".encode(), signature.encode())


def runner(app: AsyncApp, signing_secret: str, path: str, *, max_body: int = MAX_BODY,
           read_time: float = READ_TIME) -> web.AppRunner:
    """The aiohttp runner of the Request URL ``path`` (set it up, then bind it)."""
    web_app = web.Application(client_max_size=max_body)
    web_app.router.add_post(path, handler(app, signing_secret, max_body=max_body, read_time=read_time))
    # a refused body is drained for at most a second (so that the sender reads the answer), never kept
    return web.AppRunner(web_app, access_log=None, shutdown_timeout=1.0, lingering_time=1.0, auto_decompress=False,
                         logger=QuietLog(logging.getLogger(f"{__name__}.server")))


def handler(app: AsyncApp, signing_secret: str, *, max_body: int = MAX_BODY, read_time: float = READ_TIME,
            now: Callable[[], float] = time.time) -> Handler:
    """The aiohttp handler of the Request URL: refuse, or hand a signed request to ``app``."""
    secret = signing_secret.encode()

    def refuse(request: web.Request, status: int, why: str) -> web.Response:
        log.debug("slack: refused a request from %s (%s): %s", request.remote, status, why)
        return web.Response(status=status)

    async def handle(request: web.Request) -> web.StreamResponse:
        timestamp = request.headers.get("X-Slack-Request-Timestamp")
        signature = request.headers.get("X-Slack-Signature")
        if not fresh(timestamp, now()):
            return refuse(request, 401, "no timestamp, or not within five minutes")
        if not well_formed(signature):
            return refuse(request, 401, "no v0 signature")
        body = await read_capped(request, max_body, read_time)
        if isinstance(body, Refused):
            return refuse(request, body.status, body.why)
        assert timestamp is not None and signature is not None
        if not signed(secret, timestamp, body, signature):
            return refuse(request, 401, "wrong signature")
        # a plain dict, as bolt reads headers: by lower-case name, the last value of each
        headers: dict[str, str | Sequence[str]] = {name.lower(): value for name, value in request.headers.items()}
        try:
            bolt_request = AsyncBoltRequest(body=body.decode(), query=request.query_string, headers=headers)
        except ValueError as exc:  # signed, yet not UTF-8 or not JSON: nothing Slack sends
            log.warning("slack: a signed request could not be read: %s", exc)
            return web.Response(status=400)
        try:
            return await to_aiohttp_response(await app.async_dispatch(bolt_request))
        except Exception:  # a bug, logged here: aiohttp's own log of the endpoint is quiet
            log.exception("slack: handling a signed request failed")
            return web.Response(status=500)

    return handle
