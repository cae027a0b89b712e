"""A fake WhatsApp Business Cloud API on 127.0.0.1, and Meta's webhook sender, so the real
channel runs in tests.

    async with FakeWhatsApp() as wa:
        config: phone_number_id=wa.phone_number_id, access_token=wa.token, app_secret=wa.app_secret,
                verify_token=wa.verify_token, base_url=wa.base_url
        wa.webhook_url = f"http://127.0.0.1:{channel.port}/whatsapp"
        await wa.post(wa.text("hi"))              # signed as Meta signs (or forged), answered status kept
        sent = await wa.wait_for_sent(1)

Graph API (``/<version>/...``, ``Authorization: Bearer``): the phone number's record, ``POST
<id>/messages`` (text of at most 4,096 characters, a caption of 1,024, reply buttons (at most
3, titles of 20), list messages (at most 10 rows, titles of 24, a button of 20), templates,
reactions, and the read receipt with its typing indicator, all recorded), ``POST <id>/media``
(multipart upload), ``GET /<media id>`` (a received file's record and its URL) and the download
of that URL with the token. ``fail_next`` makes the next sends answer an error as Meta does
(``{"error": {"code", "message"}}``).

The window: the fake knows when each person last wrote (what ``post`` delivered, at the fake's
clock, which ``advance`` moves on). A free-form message to someone outside the 24 hours is
accepted (a message id), then a ``failed`` status with error 131047 is posted to the webhook,
as WhatsApp does; templates always go. ``status`` posts any other status.

Standalone, for benchmarks: ``python -m tests.fakes.whatsapp_server --port 0`` prints its root
(the ``base_url``; its secrets are the defaults above); ``POST /_control/post?url=...`` with
``{"user", "text"}`` (or a list of them) posts those texts signed to the bot, over one kept-alive
connection pool, and answers the ``time.monotonic()`` it started at; ``GET
/_control/sent?since=N&wait=S`` lists the messages the bot sent (``id``, ``to``, ``type``,
``text``, ``time``: when the fake recorded it).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from adapters.whatsapp.webhook import sign
from tests.fakes.serving import serve

JSON = dict[str, Any]
WINDOW = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Sent:
    id: str
    to: str
    type: str
    payload: JSON
    time: float

    @property
    def text(self) -> str:
        """What the person reads: a text's body, a caption, a question's body, a template's variable."""
        p = self.payload
        if self.type == "text":
            return str(p["text"]["body"])
        if self.type == "interactive":
            return str(p["interactive"]["body"]["text"])
        if self.type == "template":
            return " ".join(str(x.get("text", "")) for c in p["template"].get("components", [])
                            for x in c.get("parameters", []))
        return str(p.get(self.type, {}).get("caption", ""))

    @property
    def quoted(self) -> str | None:
        return (self.payload.get("context") or {}).get("message_id")


@dataclass(frozen=True, slots=True)
class Posted:
    """One webhook post to the bot: what it answered, and how long it took."""

    body: JSON
    status: int
    seconds: float


@dataclass
class _Failure:
    code: int
    http: int
    message: str
    count: int


class FakeWhatsApp:
    def __init__(self, *, token: str = "EAAG-fake-token", app_secret: str = "fake-app-secret",
                 verify_token: str = "fake-verify-token", phone_number_id: str = "106540352242922",
                 version: str = "v23.0", port: int = 0) -> None:
        self.token, self.app_secret, self.verify_token = token, app_secret, verify_token
        self.phone_number_id, self.version = phone_number_id, version
        self.webhook_url = ""
        self.sent: list[Sent] = []  # messages (text, media, questions, templates)
        self.reactions: list[Sent] = []
        self.reads: list[JSON] = []  # read receipts, with their typing indicator
        self.uploads: dict[str, tuple[str, str, bytes]] = {}  # media id -> (name, mime, bytes)
        self.media: dict[str, tuple[str, bytes]] = {}  # received media id -> (mime, bytes)
        self.posts: list[Posted] = []
        self.last_inbound: dict[str, float] = {}
        self.offset = 0.0  # seconds the fake's clock is ahead
        self.requests: list[tuple[str, str]] = []  # (method, path) of every Graph call
        self._failures: list[_Failure] = []
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.session: aiohttp.ClientSession | None = None  # posts reuse it when set (standalone), else one each
        self.port = port

    # -- set-up ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def fail_next(self, code: int, *, http: int = 400, message: str = "injected", count: int = 1) -> None:
        self._failures.append(_Failure(code, http, message, count))

    def add_media(self, data: bytes, mime: str) -> str:
        media_id = f"{next(self._ids) + 900000000}"
        self.media[media_id] = (mime, data)
        return media_id

    async def __aenter__(self) -> FakeWhatsApp:
        app = web.Application(client_max_size=200 * 1024 * 1024)
        app.router.add_post("/_control/post", self._control_post)
        app.router.add_get("/_control/sent", self._control_sent)
        app.router.add_route("*", "/{path:.*}", self._graph)
        self._runner, self.port = await serve(app, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.session is not None:
            await self.session.close()

    # -- what Meta posts ---------------------------------------------------------------------

    def body(self, *, messages: list[JSON] = (), statuses: list[JSON] = (),  # type: ignore[assignment]
             contacts: list[JSON] | None = None, phone_number_id: str | None = None) -> JSON:
        value: JSON = {"messaging_product": "whatsapp",
                       "metadata": {"display_phone_number": "15550001111",
                                    "phone_number_id": phone_number_id or self.phone_number_id}}
        if messages:
            value["contacts"] = contacts or [{"profile": {"name": "Alice"}, "wa_id": m["from"]} for m in messages]
            value["messages"] = list(messages)
        if statuses:
            value["statuses"] = list(statuses)
        return {"object": "whatsapp_business_account",
                "entry": [{"id": "WABA-1", "changes": [{"value": value, "field": "messages"}]}]}

    def message(self, kind: str, content: JSON, *, user: str = "491701234567", id: str | None = None,
                context: str | None = None) -> JSON:
        message: JSON = {"from": user, "id": id or f"wamid.IN{next(self._ids):06d}", "timestamp": str(int(self.now())),
                         "type": kind, kind: content}
        if context:
            message["context"] = {"from": "15550001111", "id": context}
        return message

    def text(self, text: str, *, user: str = "491701234567", id: str | None = None,
             context: str | None = None) -> JSON:
        return self.body(messages=[self.message("text", {"body": text}, user=user, id=id, context=context)])

    def voice(self, data: bytes, *, user: str = "491701234567") -> JSON:
        media_id = self.add_media(data, "audio/ogg; codecs=opus")
        return self.body(messages=[self.message("audio", {"id": media_id, "mime_type": "audio/ogg; codecs=opus",
                                                          "voice": True}, user=user)])

    def document(self, data: bytes, name: str, mime: str, caption: str = "", *, user: str = "491701234567") -> JSON:
        media_id = self.add_media(data, mime)
        content = {"id": media_id, "mime_type": mime, "filename": name, "caption": caption}
        return self.body(messages=[self.message("document", content, user=user)])

    def press(self, question: str, choice: str, *, user: str = "491701234567") -> JSON:
        """A press on a question's button (a reply button or a list row)."""
        asked = next(s for s in self.sent if s.id == question)
        kind = asked.payload["interactive"]["type"]
        title = next(label for ident, label in self._choices(asked) if ident == choice)
        reply = {"type": "button_reply", "button_reply": {"id": choice, "title": title}} if kind == "button" else \
            {"type": "list_reply", "list_reply": {"id": choice, "title": title}}
        return self.body(messages=[self.message("interactive", reply, user=user, context=question)])

    def failed(self, message_id: str, recipient: str, code: int, title: str) -> JSON:
        return self.body(statuses=[{"id": message_id, "status": "failed", "timestamp": str(int(self.now())),
                                    "recipient_id": recipient,
                                    "errors": [{"code": code, "title": title, "message": title,
                                                "error_data": {"details": title}}]}])

    async def post(self, body: JSON, *, signature: str | None = None, url: str | None = None,
                   raw: bytes | None = None) -> int:
        """Post ``body`` to the bot as Meta does (signed with the app secret, unless ``signature``)."""
        data = raw if raw is not None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json",
                   "X-Hub-Signature-256": signature if signature is not None else sign(self.app_secret.encode(), data)}
        if raw is None and signature is None:  # the person wrote: their window opens (before the bot answers)
            for entry in body.get("entry", []):
                for change in entry.get("changes", []):
                    for m in change.get("value", {}).get("messages", []):
                        self.last_inbound[m["from"]] = self.now()
        started = time.monotonic()
        if self.session is not None:
            async with self.session.post(url or self.webhook_url, data=data, headers=headers) as resp:
                status = resp.status
        else:
            async with aiohttp.ClientSession() as session, \
                    session.post(url or self.webhook_url, data=data, headers=headers) as resp:
                status = resp.status
        self.posts.append(Posted(body, status, time.monotonic() - started))
        self._bump()
        return status

    async def handshake(self, token: str, challenge: str = "1158201444", mode: str = "subscribe") -> tuple[int, str]:
        params = {"hub.mode": mode, "hub.verify_token": token, "hub.challenge": challenge}
        async with aiohttp.ClientSession() as session, session.get(self.webhook_url, params=params) as resp:
            return resp.status, await resp.text()

    # -- what the bot did ----------------------------------------------------------------------

    def texts(self, to: str | None = None) -> list[str]:
        return [s.text for s in self.sent if to is None or s.to == to]

    def buttons(self, question: str) -> list[str]:
        asked = next(s for s in self.sent if s.id == question)
        return [ident for ident, _ in self._choices(asked)]

    @staticmethod
    def _choices(asked: Sent) -> list[tuple[str, str]]:
        interactive = asked.payload["interactive"]
        if interactive["type"] == "button":
            return [(b["reply"]["id"], b["reply"]["title"]) for b in interactive["action"]["buttons"]]
        return [(r["id"], r["title"]) for s in interactive["action"]["sections"] for r in s["rows"]]

    async def wait_for(self, ready: Callable[[], Any], timeout: float = 5.0) -> Any:
        async with asyncio.timeout(timeout):
            while not (found := ready()):
                changed = self._changed
                await changed.wait()
        return found

    async def wait_for_sent(self, count: int = 1, timeout: float = 5.0) -> list[Sent]:
        await self.wait_for(lambda: len(self.sent) >= count, timeout)
        return list(self.sent)

    def _bump(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- the Graph API -------------------------------------------------------------------------

    @staticmethod
    def _error(http: int, code: int, message: str, details: str = "") -> web.Response:
        error: JSON = {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "Afake"}
        if details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": details}
        return web.json_response({"error": error}, status=http)

    async def _graph(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.requests.append((request.method, path))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._error(401, 190, "Error validating access token: the session has expired")
        if path.startswith("/download/"):
            mime, data = self.media.get(path.removeprefix("/download/"), ("", b""))
            return web.Response(body=data, content_type=mime.split(";")[0] or "application/octet-stream") if data \
                else web.Response(status=404)
        version, _, rest = path.strip("/").partition("/")
        if version != self.version:
            return self._error(400, 2635, f"unknown version {version}")
        if request.method == "GET" and rest == self.phone_number_id:
            return web.json_response({"display_phone_number": "+1 555-000-1111", "verified_name": "Chatgate Test",
                                      "id": self.phone_number_id})
        if request.method == "GET" and rest in self.media:
            mime, data = self.media[rest]
            return web.json_response({"messaging_product": "whatsapp", "url": f"{self.base_url}/download/{rest}",
                                      "mime_type": mime, "file_size": len(data), "sha256": "x", "id": rest})
        if request.method == "POST" and rest == f"{self.phone_number_id}/messages":
            return await self._messages(await request.json())
        if request.method == "POST" and rest == f"{self.phone_number_id}/media":
            return await self._upload(request)
        return self._error(400, 100, f"Unsupported {request.method} request {path}")

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not isinstance(upload, web.FileField):
            return self._error(400, 100, "(#100) The parameter messaging_product is required.")
        media_id = f"{next(self._ids) + 800000000}"
        self.uploads[media_id] = (upload.filename, str(form.get("type")), upload.file.read())
        self._bump()
        return web.json_response({"id": media_id})

    def _check(self, p: JSON) -> str | None:
        """Why WhatsApp would refuse the payload (error 100), or None."""
        kind = p.get("type", "text")
        if p.get("messaging_product") != "whatsapp" or not p.get("to"):
            return "messaging_product and to are required"
        if kind == "text" and not 0 < len(p["text"]["body"]) <= 4096:
            return "text.body must be 1 to 4096 characters"
        if kind in ("image", "document", "video") and len(p[kind].get("caption", "")) > 1024:
            return "caption over 1024 characters"
        if kind in ("image", "document", "video", "audio") and p[kind].get("id") not in self.uploads:
            return f"unknown media id {p[kind].get('id')}"
        if kind == "interactive":
            i = p["interactive"]
            if len(i["body"]["text"]) > 1024:
                return "interactive body over 1024 characters"
            if i["type"] == "button":
                buttons = i["action"]["buttons"]
                if not 1 <= len(buttons) <= 3 or any(len(b["reply"]["title"]) > 20 for b in buttons):
                    return "1 to 3 buttons with titles of at most 20 characters"
            elif i["type"] == "list":
                rows = [r for s in i["action"]["sections"] for r in s["rows"]]
                if len(i["action"]["button"]) > 20 or not 1 <= len(rows) <= 10 or \
                        any(len(r["title"]) > 24 or len(r["id"]) > 200 for r in rows):
                    return "a list of 1 to 10 rows with titles of at most 24 characters"
        if kind == "template":
            for component in p["template"].get("components", []):
                for parameter in component.get("parameters", []):
                    if any(c in parameter.get("text", "") for c in "\n\t") or "     " in parameter.get("text", ""):
                        return "(#132018) template parameter with new lines, tabs or more than 4 spaces"
        return None

    async def _messages(self, p: JSON) -> web.Response:
        if self._failures:
            failure = self._failures[0]
            failure.count -= 1
            if failure.count <= 0:
                self._failures.pop(0)
            return self._error(failure.http, failure.code, failure.message, failure.message)
        if p.get("status") == "read":
            if p.get("messaging_product") != "whatsapp" or not str(p.get("message_id", "")).startswith("wamid."):
                return self._error(400, 100, "message_id required")
            self.reads.append(p)
            self._bump()
            return web.json_response({"success": True})
        if (problem := self._check(p)) is not None:
            return self._error(400, 100, f"(#100) Invalid parameter: {problem}")
        sent = Sent(f"wamid.OUT{next(self._ids):06d}", str(p["to"]), str(p.get("type", "text")), p, time.monotonic())
        (self.reactions if sent.type == "reaction" else self.sent).append(sent)
        self._bump()
        last = self.last_inbound.get(sent.to)
        if sent.type not in ("template", "reaction") and (last is None or self.now() - last >= WINDOW):
            task = asyncio.ensure_future(self._later(self.failed(sent.id, sent.to, 131047, "Re-engagement message")))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return web.json_response({"messaging_product": "whatsapp", "contacts": [{"input": sent.to, "wa_id": sent.to}],
                                  "messages": [{"id": sent.id}]})

    async def _later(self, body: JSON) -> None:
        await asyncio.sleep(0.05)
        if self.webhook_url:
            await self.post(body)

    # -- control (bench) -------------------------------------------------------------------------

    async def _control_post(self, request: web.Request) -> web.Response:
        body = await request.json()
        at = time.monotonic()
        statuses = [await self.post(self.text(m["text"], user=m["user"]), url=request.query["url"])
                    for m in (body if isinstance(body, list) else [body])]
        return web.json_response({"at": at, "statuses": statuses})

    async def _control_sent(self, request: web.Request) -> web.Response:
        since, wait = int(request.query.get("since", 0)), float(request.query.get("wait", 0))
        try:
            await self.wait_for(lambda: len(self.sent) > since, timeout=wait)
        except TimeoutError:
            pass
        return web.json_response([{"id": s.id, "to": s.to, "type": s.type, "text": s.text, "time": s.time}
                                  for s in self.sent[since:]])


async def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    async with FakeWhatsApp(port=args.port) as wa:
        wa.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        print(wa.base_url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(_main())
