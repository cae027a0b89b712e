"""The web chat's server (aiohttp): sign-in, the page, and its calls.

Sign-in: a one-time link (``/signin?t=...``, confirmed by a POST so that a link preview never
uses it up) or a code sent to the person's linked chat account; then an HttpOnly,
SameSite=Strict cookie. Every POST must come from this page (``Origin``/``Referer``) and carry
the sign-in's CSRF token (a form field, or the ``X-CSRF`` header of the page's calls); the
event stream is refused to other sites; every response carries a strict CSP (this origin's
script and stylesheet only, nothing inline). The dashboard's pieces do the checks
(``bot.web.auth``).

A message goes in through the API's door (the person's access, limits, rights), in the
session ``thread`` of the person's own; the answer comes back through the ``webchat``
channel to the page's event stream: deltas while it streams, then the stored answer as HTML
(``bot.api.webchat.dialect``), buttons for approvals, files to download.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aiohttp import BodyPartReader, web

from bot.api.channel import Item
from bot.api.door import Door
from bot.api.people import Person, person_named
from bot.api.sessions import new_thread
from bot.api.webchat import invites
from bot.api.webchat.channel import WebChannel
from bot.api.webchat.config import WebchatConfig
from bot.api.webchat.dialect import HTML
from bot.api.webchat.page import chat_page, signin_page
from bot.api.wire import ApiError
from bot.conversation import ChannelInfo, Conversation
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender, Target
from bot.outbound.markdown import render
from bot.web.auth import LoginLimiter, Sessions, csrf_ok, feed_allowed, host_allowed, own_origin, same_origin
from bot.workspace import OutsideWorkspaceError, save_upload

log = logging.getLogger(__name__)

COOKIE = "chatgate_web"
INFO = ChannelInfo("webchat", "the web chat", "This is a web page: Markdown is shown formatted.")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
           "Referrer-Policy": "same-origin", "Cross-Origin-Opener-Policy": "same-origin",
           "Cross-Origin-Resource-Policy": "same-origin", "Cache-Control": "no-store"}
STATIC = {"chat.js": "text/javascript", "chat.css": "text/css"}
CODE_TTL = 600.0
MAX_FILES = 20  # files kept per sign-in for download


@dataclass(slots=True)
class Visitor:
    person: str
    uploads: dict[str, Attachment] = field(default_factory=dict)  # upload id -> saved attachment
    files: OrderedDict[str, tuple[str, bytes]] = field(default_factory=OrderedDict)  # ref -> (name, data)


class WebchatServer:
    def __init__(self, cfg: WebchatConfig, door: Door, channel: WebChannel, store: Any, *, agent: str,
                 identity_links: Any, workspaces: Any, say: Callable[[str, str, Target, str], Awaitable[None]],
                 running: Callable[[], Any]) -> None:
        self._cfg, self._door, self._channel, self._store = cfg, door, channel, store
        self._agent, self._links, self._workspaces = agent, identity_links, workspaces
        self._say, self._running = say, running
        self._sessions: Sessions[str] = Sessions(cfg.session_days * 86400)
        self._visitors: dict[str, Visitor] = {}  # login csrf -> what the sign-in holds
        self._limiter = LoginLimiter()
        self._tls = cfg.tls_cert is not None
        self.app = web.Application(client_max_size=int(cfg.max_upload_mb * 1024 * 1024) + 65536,
                                   middlewares=[self._guard])
        self.app.on_response_prepare.append(_headers)
        r = self.app.router
        r.add_get("/", self._home)
        r.add_get("/signin", self._signin_form)
        r.add_post("/signin", self._signin)
        r.add_post("/code/send", self._send_code)
        r.add_post("/code", self._code)
        r.add_post("/new", self._new)
        r.add_get("/c/{thread}", self._chat)
        r.add_get("/events/{thread}", self._events)
        r.add_post("/send/{thread}", self._send)
        r.add_post("/stop/{thread}", self._stop)
        r.add_post("/press/{thread}", self._press)
        r.add_post("/upload/{thread}", self._upload)
        r.add_get("/file/{ref}", self._file)
        r.add_get("/static/{name}", _static)

    # -- the guard -----------------------------------------------------------------------

    def _origin(self, request: web.Request) -> str:
        return own_origin(request.headers, tls=self._tls, behind_proxy=self._cfg.behind_proxy)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        loopback_only = not self._cfg.allow_remote
        if not host_allowed(request.headers.get("Host"), loopback_only=loopback_only):
            return web.Response(status=421, text="Misdirected request")
        if request.method == "POST" and not same_origin(request.headers, self._origin(request)):
            log.info("webchat: a POST from another origin refused (%s)", request.path)
            return web.Response(status=403, text="Forbidden: not from this page")
        open_paths = ("/", "/signin", "/code", "/code/send")
        if request.path in open_paths or request.path.startswith("/static/"):
            return await handler(request)
        login = self._sessions.get(request.cookies.get(COOKIE))
        if login is None or login.csrf not in self._visitors:
            if request.method == "GET" and not request.path.startswith(("/events/", "/file/")):
                raise web.HTTPSeeOther("/")
            return web.Response(status=401, text="Sign in first")
        if request.method == "POST":
            sent: object = request.headers.get("X-CSRF")
            if sent is None and request.content_type == "application/x-www-form-urlencoded":
                sent = (await request.post()).get("csrf")
            if not csrf_ok(login, sent if isinstance(sent, str) else None):
                log.info("webchat: a POST without the page's token refused (%s)", request.path)
                return web.Response(status=403, text="Forbidden: the page's token is missing")
        request["visitor"] = self._visitors[login.csrf]
        request["csrf"] = login.csrf
        return await handler(request)

    def _visitor(self, request: web.Request) -> tuple[Visitor, Person]:
        visitor: Visitor = request["visitor"]
        person = person_named(visitor.person, self._links)
        if person is None:
            raise web.HTTPForbidden(text="this person is not known here any more")
        return visitor, person

    def _conversation(self, person: Person, thread: str) -> Conversation:
        if not thread.startswith("w") or not thread[1:].isalnum() or len(thread) > 40:
            raise web.HTTPNotFound()
        return person.conversation(self._agent, "webchat", thread, INFO)

    # -- signing in ----------------------------------------------------------------------

    def _signed_in(self, person: str) -> web.Response:
        token, login = self._sessions.open(person, "person")
        self._visitors[login.csrf] = Visitor(person)
        response = web.HTTPSeeOther("/")
        response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", secure=self._tls or self._cfg.behind_proxy,
                            path="/", max_age=int(self._cfg.session_days * 86400))
        log.info("webchat: %s signed in", person)
        return response

    async def _home(self, request: web.Request) -> web.StreamResponse:
        login = self._sessions.get(request.cookies.get(COOKIE))
        if login is None or login.csrf not in self._visitors:
            return _html(signin_page())
        threads = await self._store.read(invites.threads(self._visitors[login.csrf].person))
        raise web.HTTPSeeOther(f"/c/{threads[0][0] if threads else 'w' + new_thread()[1:]}")

    async def _signin_form(self, request: web.Request) -> web.StreamResponse:
        return _html(signin_page(token=request.query.get("t", "")))

    async def _signin(self, request: web.Request) -> web.StreamResponse:
        token = (await request.post()).get("token")
        person = await self._store.write(invites.take(token)) if isinstance(token, str) and token else None
        if person is None:
            return _html(signin_page("This sign-in link was used already or has expired; ask for a new one."), 403)
        return self._signed_in(person)

    async def _send_code(self, request: web.Request) -> web.StreamResponse:
        name = str((await request.post()).get("person", "")).strip()
        person = person_named(name, self._links) if name else None
        channels = self._running()
        account = next(((p, u) for p, u in person.accounts if p in channels and p not in ("api", "webchat")), None) \
            if person is not None else None
        if person is not None and account is not None:
            code = f"{secrets.randbelow(10**6):06d}"
            await self._store.write(invites.add(f"{person.name}\0{code}", person.name, CODE_TTL))
            await self._say(account[0], f"webchat-code-{secrets.token_hex(6)}", Target(account[1], ChatType.DM),
                            f"Your web chat sign-in code is {code} (it works once, for 10 minutes). "
                            "If you did not ask for it, ignore this message.")
        return _html(signin_page("If that name is known here, a code was sent to your chat app."))

    async def _code(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name, code = str(form.get("person", "")).strip(), str(form.get("code", "")).strip()
        address = request.remote or ""
        if (wait := self._limiter.attempt(address, name)) is not None:
            return _html(signin_page(f"Too many attempts; try again in {wait:.0f} s."), 429)
        person = await self._store.write(invites.take(f"{name}\0{code}")) if name and code else None
        if person is None:
            return _html(signin_page("That code is not right, or it has expired."), 403)
        self._limiter.succeeded(address, name)
        return self._signed_in(person)

    # -- the page ------------------------------------------------------------------------

    async def _new(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(f"/c/w{new_thread()[1:]}")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        visitor, person = self._visitor(request)
        thread = request.match_info["thread"]
        conversation = self._conversation(person, thread)
        threads = await self._store.read(invites.threads(person.name))
        past: list[tuple[str, str]] = []
        if any(t == thread for t, _ in threads):
            session = await self._store.session(conversation)
            for message in await self._store.history(session, 40):
                text = message.text
                if message.role.value == "assistant" and text:
                    past.append(("assistant", render(text, HTML)))
                elif message.role.value == "user" and text:
                    past.append(("user", _said(text)))
        return _html(chat_page(person.name, request["csrf"], thread, threads, past))

    async def _events(self, request: web.Request) -> web.StreamResponse:
        if not feed_allowed(request.headers, self._origin(request)):
            return web.Response(status=403, text="Forbidden")
        visitor, person = self._visitor(request)
        thread = request.match_info["thread"]
        self._conversation(person, thread)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        watch = self._channel.watch(thread)
        try:
            await response.write(b": hello\n\n")
            while True:
                try:
                    item = await asyncio.wait_for(watch.items.get(), 15)
                except TimeoutError:
                    await response.write(b": still here\n\n")
                    continue
                await response.write(f"data: {json.dumps(self._shown(visitor, item))}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._channel.unwatch(thread, watch)
        return response

    def _shown(self, visitor: Visitor, item: Item) -> dict[str, Any]:
        shown: dict[str, Any] = {"kind": item.kind, "ref": item.ref}
        if item.kind == "delta" or item.kind == "note":
            shown["text"] = item.text  # shown as text by the page, never as HTML
        elif item.kind in ("say", "ask", "closed", "edit"):
            shown["html"] = item.text  # rendered by the HTML dialect: escaped text in its own tags
            shown["choices"] = [{"id": c, "label": label} for c, label in item.choices]
        elif item.kind == "file":
            visitor.files[item.ref] = (item.name, item.data)
            while len(visitor.files) > MAX_FILES:
                visitor.files.popitem(last=False)
            shown.update(name=item.name, url=f"/file/{item.ref}", html=item.text)
        elif item.kind == "end":
            shown["outcome"] = item.outcome
        return shown

    async def _send(self, request: web.Request) -> web.StreamResponse:
        visitor, person = self._visitor(request)
        thread = request.match_info["thread"]
        conversation = self._conversation(person, thread)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": "not JSON"}, status=400)
        text = str(body.get("text", "")).strip() if isinstance(body, dict) else ""
        files = tuple(visitor.uploads.pop(i) for i in body.get("files", []) if i in visitor.uploads)
        if not text and not files:
            return web.json_response({"error": "say something"}, status=400)
        if text.lower() == "/stop":
            await self._door.stop(conversation)
            return web.json_response({"ok": True, "stopped": True})
        refusal = await self._door.admit(person)
        if refusal is not None:
            return _refused(refusal)
        await self._store.write(invites.add_thread(person.name, thread, text or files[0].name))
        try:
            sent = await self._door.send(person, conversation, text, f"web-{secrets.token_hex(8)}", files)
        except ApiError as exc:
            return _refused(exc)
        if sent is None:
            return web.json_response({"error": "busy: too many messages wait here"}, status=429)
        return web.json_response({"ok": True})

    async def _stop(self, request: web.Request) -> web.StreamResponse:
        _, person = self._visitor(request)
        stopped = await self._door.stop(self._conversation(person, request.match_info["thread"]))
        return web.json_response({"ok": True, "stopped": stopped})

    async def _press(self, request: web.Request) -> web.StreamResponse:
        _, person = self._visitor(request)
        thread = request.match_info["thread"]
        self._conversation(person, thread)
        body = await request.json()
        choice, ref = str(body.get("choice", "")), str(body.get("ref", ""))
        if self._channel.inbox is None or not choice:
            return web.json_response({"error": "nothing to press"}, status=400)
        await self._channel.inbox(InboundMessage("webchat", "webchat", thread, ChatType.DM,
                                                 Sender(person.name, person.name), choice,
                                                 f"press-{secrets.token_hex(8)}", reply_to=ref))
        return web.json_response({"ok": True})

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        visitor, person = self._visitor(request)
        conversation = self._conversation(person, request.match_info["thread"])
        refusal = await self._door.admit(person)
        if refusal is not None:
            return _refused(refusal)
        reader = await request.multipart()
        part = await reader.next()
        if not isinstance(part, BodyPartReader) or not part.filename:
            return web.json_response({"error": "no file"}, status=400)
        limit = int(self._cfg.max_upload_mb * 1024 * 1024)
        data = bytearray()
        while chunk := await part.read_chunk():
            data += chunk
            if len(data) > limit:
                return web.json_response({"error": f"files up to {self._cfg.max_upload_mb:g} MB"}, status=413)
        workspace = await self._workspaces.prepare(conversation)
        try:
            path = await asyncio.to_thread(save_upload, workspace, part.filename, bytes(data))
        except OutsideWorkspaceError:
            return web.json_response({"error": "inbox/ in your workspace leads outside it"}, status=409)
        upload_id = secrets.token_hex(8)
        kind = AttachmentKind.IMAGE if (part.headers.get("Content-Type", "")).startswith("image/") \
            else AttachmentKind.DOCUMENT
        visitor.uploads[upload_id] = Attachment(kind, part.filename, part.headers.get("Content-Type"), len(data), path)
        return web.json_response({"id": upload_id, "name": part.filename, "path": path})

    async def _file(self, request: web.Request) -> web.StreamResponse:
        visitor, _ = self._visitor(request)
        found = visitor.files.get(request.match_info["ref"])
        if found is None:
            return web.Response(status=404, text="This file is not here any more.")
        name, data = found
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "file"
        return web.Response(body=data, content_type="application/octet-stream",
                            headers={"Content-Disposition": f'attachment; filename="{safe}"'})


def _said(text: str) -> str:
    """A stored user message as the person wrote it (the runtime context the bot added dropped)."""
    return text.rsplit("\n\n", 1)[-1] if text.startswith("[") else text


def _refused(error: ApiError) -> web.Response:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else {}
    return web.json_response({"error": error.message}, status=error.status, headers=headers)


def _html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html")


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers["Server"] = "chatgate"


async def _static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    data = resources.files("bot.api.webchat").joinpath("static", name).read_bytes()
    return web.Response(body=data, content_type=STATIC[name], headers={"Cache-Control": "max-age=3600"})
