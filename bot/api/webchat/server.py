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
(``bot.api.webchat.dialect``), buttons for approvals, files to download. A command (``/status``,
``/stop``, ``/approve``...) goes through the intake as any platform's does, in the same session.

The stream's events are numbered: a page that comes back gets what it missed (``Last-Event-ID``),
or is told to load again when that is not kept any more; the person's own text and the answers
are logged, so that a loaded page shows them as they were. A person's page also hears what is
theirs beyond its thread: their conversations' list, and the questions of their API runs (and,
for an owner, of anyone's) as buttons, which press in that API conversation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from typing import Any

from aiohttp import BodyPartReader, web

from bot.agent.events import EventKind, RunEvent
from bot.api.channel import ExchangeChannel, Item, Question, Watch
from bot.api.door import Door
from bot.api.people import Person, person_named
from bot.api.sessions import new_thread
from bot.api.webchat import invites
from bot.api.webchat.channel import WebChannel
from bot.api.webchat.config import WebchatConfig
from bot.api.webchat.page import chat_page, signin_page
from bot.api.webchat.signin import SignIn, html
from bot.api.wire import ApiError
from bot.commands import parse_command
from bot.conversation import ChannelInfo, Conversation
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender, Target
from bot.tasks import OwnedTasks
from bot.tools.approval import Decision, choice_id
from bot.web.auth import Sessions, csrf_ok, feed_allowed, host_allowed, own_origin, same_origin
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
MAX_FILES = 20  # files kept per sign-in for download
TITLE_WAIT = 90  # seconds a new thread's title is looked for after its first answer


@dataclass(slots=True)
class Visitor:
    person: str
    uploads: dict[str, Attachment] = field(default_factory=dict)  # upload id -> saved attachment
    files: OrderedDict[str, tuple[str, bytes]] = field(default_factory=OrderedDict)  # ref -> (name, data)


class WebchatServer:
    def __init__(self, cfg: WebchatConfig, door: Door, channel: WebChannel, store: Any, *, agent: str,
                 identity_links: Any, workspaces: Any, say: Callable[[str, str, Target, str], Awaitable[None]],
                 running: Callable[[], Any], api: ExchangeChannel | None = None,
                 approvers: Sequence[str] = ("requester", "owners")) -> None:
        self._cfg, self._door, self._channel, self._store = cfg, door, channel, store
        self._agent, self._links, self._workspaces = agent, identity_links, workspaces
        self._api, self._approvers = api, tuple(approvers)
        self._sessions: Sessions[str] = Sessions(cfg.session_days * 86400)
        self._visitors: dict[str, Visitor] = {}  # login csrf -> what the sign-in holds
        self._online: dict[str, int] = {}  # person -> their pages' event streams open now
        self._untitled: dict[str, str] = {}  # a new thread -> its person, until the model titles it
        self._tasks = OwnedTasks()
        self._tls = cfg.tls_cert is not None
        if api is not None:
            api.listeners.append(self._heard)
        self.app = web.Application(client_max_size=int(cfg.max_upload_mb * 1024 * 1024) + 65536,
                                   middlewares=[self._guard])
        self.app.on_response_prepare.append(_headers)
        r = self.app.router
        r.add_get("/", self._home)
        SignIn(store, identity_links, running=running, say=say, signed_in=self._signed_in).route(self.app)
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

    async def _conversation(self, person: Person, thread: str) -> Conversation:
        """``thread`` of ``person``: theirs, or new (nobody else's)."""
        if not thread.startswith("w") or not thread[1:].isalnum() or len(thread) > 40:
            raise web.HTTPNotFound()
        if (await self._store.read(invites.owner_of(thread))) not in (None, person.name):
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
            return html(signin_page())
        threads = await self._store.read(invites.threads(self._visitors[login.csrf].person))
        raise web.HTTPSeeOther(f"/c/{threads[0][0] if threads else 'w' + new_thread()[1:]}")

    # -- the page ------------------------------------------------------------------------

    async def _new(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(f"/c/w{new_thread()[1:]}")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        _, person = self._visitor(request)
        thread = request.match_info["thread"]
        await self._conversation(person, thread)
        after = f"{self._channel.epoch}-{self._channel.last}"  # before the log is read: nothing falls between
        threads = await self._store.read(invites.threads(person.name))
        past = await self._store.read(invites.shown(thread))
        return html(chat_page(person.name, request["csrf"], thread, threads, past, after))

    async def _events(self, request: web.Request) -> web.StreamResponse:
        if not feed_allowed(request.headers, self._origin(request)):
            return web.Response(status=403, text="Forbidden")
        visitor, person = self._visitor(request)
        thread = request.match_info["thread"]
        await self._conversation(person, thread)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        watch, mine = Watch(person.name), "@" + person.name
        self._channel.watch(thread, watch)
        self._channel.watch(mine, watch)
        self._online[person.name] = self._online.get(person.name, 0) + 1
        try:
            await response.write(b"retry: 1000\n\n")
            epoch, _, number = (request.headers.get("Last-Event-ID") or request.query.get("after", "")).partition("-")
            missed = self._missed(thread, mine, int(number)) if number.isdigit() and epoch == self._channel.epoch \
                else [] if not epoch else None
            if missed is None:  # not all of it is kept here any more: the page loads the thread again
                await response.write(b'data: {"kind": "reload"}\n\n')
                return response
            for item in [*missed, *self._present(person, thread)]:
                await self._write(response, visitor, item)
            done = max((item.id for item in missed), default=int(number) if number.isdigit() else 0)
            while True:
                try:
                    item = await asyncio.wait_for(watch.items.get(), 15)
                except TimeoutError:
                    await response.write(b": still here\n\n")
                    continue
                if item.id > done:
                    await self._write(response, visitor, item)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._channel.unwatch(thread, watch)
            self._channel.unwatch(mine, watch)
            self._online[person.name] -= 1
            if not self._online[person.name]:
                del self._online[person.name]
        return response

    def _missed(self, thread: str, mine: str, after: int) -> list[Item] | None:
        found = [self._channel.since(thread, after), self._channel.since(mine, after)]
        if found[0] is None or found[1] is None:
            return None
        return sorted([*found[0], *found[1]], key=lambda item: item.id)

    def _present(self, person: Person, thread: str) -> list[Item]:
        """What a page is shown whenever its stream opens: the questions open for it."""
        here = [Item("ask", q.text, ref=q.ref, choices=q.choices) for q in self._channel.questions.values()
                if q.chat == thread]
        api = self._api.questions.values() if self._api is not None else ()
        return here + [_api_item("ask", q) for q in api if self._may_answer(person, q)]

    async def _write(self, response: web.StreamResponse, visitor: Visitor, item: Item) -> None:
        number = f"id: {self._channel.epoch}-{item.id}\n" if item.id else ""
        await response.write(f"{number}data: {json.dumps(self._shown(visitor, item))}\n\n".encode())

    def _shown(self, visitor: Visitor, item: Item) -> dict[str, Any]:
        shown: dict[str, Any] = {"kind": item.kind, "ref": item.ref, "lid": item.lid}
        if item.kind in ("delta", "note", "user"):
            shown.update(text=item.text, nonce=item.nonce)  # shown as text by the page, never as HTML
        elif item.kind in ("say", "ask", "closed", "edit"):
            shown["html"] = item.text  # rendered by the HTML dialect (or escaped here): escaped text in tags
            shown["choices"] = [{"id": c, "label": label} for c, label in item.choices]
        elif item.kind == "threads":
            shown["threads"] = [{"thread": t, "title": title} for t, title in item.choices]
        elif item.kind == "file":
            visitor.files[item.ref] = (item.name, item.data)
            while len(visitor.files) > MAX_FILES:
                visitor.files.popitem(last=False)
            shown.update(name=item.name, url=f"/file/{item.ref}", html=item.text)
        elif item.kind == "end":
            shown["outcome"] = item.outcome
        return shown

    # -- the person's questions elsewhere (their API runs') ------------------------------

    def _may_answer(self, person: Person, question: Question) -> bool:
        """Whether ``person`` may answer a question of an API run (as the approvals decide it)."""
        return (("requester" in self._approvers and question.person == person.name)
                or ("owners" in self._approvers and self._door.owner(person)))

    def _heard(self, kind: str, question: Question, note: str) -> None:
        """The API's channel asked, closed or answered a press: told to the pages it is for."""
        if kind == "note":
            self._channel.tell("@" + question.person, Item("note", note))
            return
        for name in {question.person, *self._online}:  # the requester's own are kept while no page is open
            if (person := person_named(name, self._links)) is not None and self._may_answer(person, question):
                self._channel.tell("@" + name, _api_item(kind, question))

    async def _press_api(self, person: Person, question: Question, choice: str) -> bool:
        if self._api is None or self._api.inbox is None or not self._may_answer(person, question):
            return False
        await self._api.inbox(InboundMessage("api", "api", question.chat, ChatType.DM, Sender(person.name, person.name),
                                             choice, f"press-{secrets.token_hex(8)}", reply_to=question.ref))
        return True

    async def _threads(self, person: str) -> None:
        """The person's conversations, told to their pages (a new one, a new title)."""
        threads = await self._store.read(invites.threads(person))
        self._channel.tell("@" + person, Item("threads", choices=tuple(threads)))

    def on_event(self, event: RunEvent) -> None:
        """The event bus's inline subscriber: a new thread's first answer is stored; its title follows."""
        thread = event.conversation.chat_id
        if event.kind is EventKind.COMPLETED and event.conversation.platform == "webchat" and thread in self._untitled:
            self._tasks.spawn(self._titled(event.conversation, self._untitled.pop(thread)), f"webchat title {thread}")

    async def _titled(self, conversation: Conversation, person: str) -> None:
        """The session's title, once the model gave it (``models.titles``, in the background after
        the first answer; none within a while: the first message stays the title)."""
        session = await self._store.session(conversation)
        for _ in range(TITLE_WAIT):
            if (title := await self._store.title(session)) is not None:
                if await self._store.write(invites.retitle(person, conversation.chat_id, title)):
                    await self._threads(person)
                return
            await asyncio.sleep(1.0)

    async def aclose(self) -> None:
        await self._tasks.stop()

    # -- what the page sends -------------------------------------------------------------

    async def _send(self, request: web.Request) -> web.StreamResponse:
        visitor, person = self._visitor(request)
        thread = request.match_info["thread"]
        conversation = await self._conversation(person, thread)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": "not JSON"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "not an object"}, status=400)
        text, nonce = str(body.get("text", "")).strip(), str(body.get("nonce", ""))[:40]
        files = tuple(visitor.uploads.pop(i) for i in body.get("files", []) if i in visitor.uploads)
        if not text and not files:
            return web.json_response({"error": "say something"}, status=400)
        command = parse_command(text) if not files else None
        if command is not None and command.name in ("new", "reset"):
            return web.json_response({"ok": True, "go": f"/c/w{new_thread()[1:]}"})
        if command is not None:
            if not await self._door.may_use(person):
                return _refused(ApiError(403, "You may not use this assistant any more; ask its owner."))
        elif (refusal := await self._door.admit(person)) is not None:
            return _refused(refusal)
        if await self._store.write(invites.add_thread(person.name, thread, text or files[0].name)):
            self._untitled[thread] = person.name
            while len(self._untitled) > 1000:
                self._untitled.pop(next(iter(self._untitled)))
            await self._threads(person.name)
        attached = f"Attached: {', '.join(f.name for f in files)}" if files else ""
        shown = text + ("\n" if text and files else "") + attached
        lid = await self._store.write(invites.said(thread, "user", shown))
        self._channel.tell(thread, Item("user", shown, lid=lid, nonce=nonce))
        if command is not None:
            return web.json_response({"ok": await self._command(person, thread, text, command.name, command.args),
                                      "lid": lid})
        try:
            sent = await self._door.send(person, conversation, text, f"web-{secrets.token_hex(8)}", files)
        except ApiError as exc:
            return _refused(exc)
        if sent is None:
            return web.json_response({"error": "busy: too many messages wait here"}, status=429)
        return web.json_response({"ok": True, "lid": lid})

    async def _command(self, person: Person, thread: str, text: str, name: str, args: str) -> bool:
        """A typed command, handled as on every platform (the intake, in this thread's session);
        ``/approve`` or ``/deny`` of a question of the person's API run is that question's press."""
        approval, _, how = args.partition(" ")
        if name in ("approve", "deny") and self._api is not None:
            question = next((q for q in self._api.questions.values() if q.approval == approval.strip()), None)
            how = "deny" if name == "deny" else how.strip().lower() or "once"
            decision = {"once": Decision.ONCE, "session": Decision.SESSION, "always": Decision.ALWAYS,
                        "deny": Decision.DENY}.get(how)
            if question is not None and decision is not None and \
                    await self._press_api(person, question, choice_id(question.approval, decision)):
                return True
        if self._channel.inbox is None:
            return False
        await self._channel.inbox(InboundMessage("webchat", "webchat", thread, ChatType.DM,
                                                 Sender(person.name, person.name), text,
                                                 f"web-{secrets.token_hex(8)}", addressed=True))
        return True

    async def _stop(self, request: web.Request) -> web.StreamResponse:
        _, person = self._visitor(request)
        stopped = await self._door.stop(await self._conversation(person, request.match_info["thread"]))
        return web.json_response({"ok": True, "stopped": stopped})

    async def _press(self, request: web.Request) -> web.StreamResponse:
        _, person = self._visitor(request)
        thread = request.match_info["thread"]
        await self._conversation(person, thread)
        body = await request.json()
        choice, ref = str(body.get("choice", "")), str(body.get("ref", ""))
        asked = self._api.questions.get(ref) if self._api is not None else None
        if asked is not None and choice in {c for c, _ in asked.choices}:
            return web.json_response({"ok": await self._press_api(person, asked, choice)})
        if self._channel.inbox is None or not choice:
            return web.json_response({"error": "nothing to press"}, status=400)
        await self._channel.inbox(InboundMessage("webchat", "webchat", thread, ChatType.DM,
                                                 Sender(person.name, person.name), choice,
                                                 f"press-{secrets.token_hex(8)}", reply_to=ref))
        return web.json_response({"ok": True})

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        visitor, person = self._visitor(request)
        conversation = await self._conversation(person, request.match_info["thread"])
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


def _api_item(kind: str, question: Question) -> Item:
    """An API run's question as a page shows it: its text (plain) escaped, its buttons."""
    return Item(kind, '<p class="elsewhere">In a conversation through the API:</p>'
                + escape(question.text).replace("\n", "<br>"), ref=question.ref, choices=question.choices)


def _refused(error: ApiError) -> web.Response:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else {}
    return web.json_response({"error": error.message}, status=error.status, headers=headers)


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
