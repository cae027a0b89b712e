"""A fake Slack on 127.0.0.1, so the real slack-bolt and slack_sdk run in tests.

    async with FakeSlack() as slack:
        config = SlackConfig(enabled=True, bot_token=slack.bot_token, app_token=slack.app_token,
                             base_url=slack.base_url, ...)
        await slack.push(slack.event(slack.message("D1", "hi")))     # over Socket Mode
        await slack.post_event(url, slack.event(...), retry_num=1)  # signed, to the bot's HTTP endpoint
        sent = await slack.wait_for_posts(1)

Web API (``/api/<method>``, form, query or JSON bodies, ``Authorization: Bearer``): auth.test
(with ``x-oauth-scopes``), chat.postMessage/update/delete (``msg_too_long`` above 40,000
characters, ``invalid_blocks`` for a section over 3,000, a button's text over 75 or two
buttons of one block with one action_id), chat.postEphemeral (kept apart, in ``ephemerals``:
nobody but its user sees it), chat.startStream/appendStream/
stopStream (``message_not_in_streaming_state`` once a stream is older than
``stream_limit`` or stopped; channels need the recipient), reactions.add/remove
(``already_reacted``, ``no_reaction``), users.info, conversations.info,
assistant.threads.setStatus (assistant threads are DM threads), the external file upload
flow and file download with the bot token, apps.connections.open. ``fail_next`` makes the
next calls of a method answer 429 with ``Retry-After`` or an error. Socket Mode: the URL
apps.connections.open returns is a WebSocket here: ``hello`` on connect, envelopes with
``push``, acks recorded in ``acks`` (``ack_delay``: how long one took); ``drop`` closes the
connections, ``socket_down`` refuses new ones (503) meanwhile. Events API:
``post_event`` signs a body with the signing secret (or a wrong one, or a stale timestamp)
and posts it to the bot; ``answers`` records each one's status and how long it took.
Button presses: ``click`` makes the ``block_actions`` payload of a click on a posted
message's button, to ``push`` (Socket Mode) or ``post_event`` (HTTP, form-encoded
``payload=``); Slack wants either acknowledged within 3 s.

Standalone, for benchmarks: ``python -m tests.fakes.slack_server --port 0`` prints its root;
``POST /_control/push`` (a body for Socket Mode) or ``POST /_control/post?url=...`` (signed to
the bot; both answer with the ``time.monotonic()`` they started at), ``GET
/_control/posts?since=N&wait=S`` lists what the bot posted (and streamed), ``GET
/_control/state`` counts sockets, connections opened, auth.test calls and acks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import signal
import time
import urllib.parse
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.serving import serve

JSON = dict[str, Any]
MAX_TEXT = 40_000  # chat.postMessage answers msg_too_long above this
MAX_SECTION = 3_000
STREAM_LIMIT = 300.0  # seconds a stream stays open on Slack


@dataclass
class Post:
    method: str  # chat.postMessage, chat.update, chat.startStream, files.completeUploadExternal
    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    blocks: list[JSON] | None = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class Ephemeral:
    """A chat.postEphemeral: shown to ``user`` alone, never part of the channel's history."""

    channel: str
    user: str
    text: str
    thread_ts: str | None = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class Answer:
    """The bot's answer to one ``post_event``: its HTTP status, and how long it took."""

    kind: str  # the payload's type: event_callback, block_actions, or a slash command's "command"
    status: int
    seconds: float


@dataclass
class Stream:
    channel: str
    ts: str
    thread_ts: str
    started: float
    text: str = ""
    state: str = "streaming"  # streaming | stopped


@dataclass
class Failure:
    status: int
    error: str
    retry_after: int | None = None


class FakeSlack:
    def __init__(self, *, bot_token: str = "xoxb-test-token", app_token: str = "xapp-test-token",
                 signing_secret: str = "test-signing-secret", team_id: str = "T0001", bot_user: str = "UBOT",
                 bot_id: str = "BBOT", host: str = "127.0.0.1", port: int = 0,
                 scopes: str = "chat:write,app_mentions:read,im:history,channels:history,groups:history,"
                               "mpim:history,reactions:write,users:read,files:read,files:write,assistant:write,"
                               "commands") -> None:
        self.bot_token, self.app_token, self.signing_secret = bot_token, app_token, signing_secret
        self.team_id, self.bot_user, self.bot_id, self.scopes = team_id, bot_user, bot_id, scopes
        self.host, self.port = host, port
        self.calls: list[tuple[str, JSON]] = []
        self.posts: list[Post] = []  # every message the bot posted or changed, in order
        self.messages: dict[tuple[str, str], Post] = {}  # (channel, ts) -> the message as it is now
        self.deleted: list[tuple[str, str]] = []
        self.reactions: dict[tuple[str, str], set[str]] = {}  # (channel, ts) -> names on it now
        self.reaction_log: list[tuple[str, str, str, str]] = []  # (add|remove, channel, ts, name)
        self.statuses: list[tuple[str, str, str]] = []  # (channel, thread_ts, status)
        self.streams: dict[str, Stream] = {}
        self.stream_limit = STREAM_LIMIT
        self.users: dict[str, JSON] = {}
        self.files: dict[str, tuple[str, str, bytes]] = {}  # id -> (name, mime, bytes) downloadable
        self.uploads: dict[str, JSON] = {}  # file id -> {name, data, ...}
        self.downloads: list[str] = []  # ids of files downloaded with the bot token
        self.acks: list[JSON] = []  # Socket Mode acks, as the bot sent them
        self.pushed: dict[str, float] = {}  # envelope id -> when it was sent (time.monotonic())
        self.acked: dict[str, float] = {}  # envelope id -> when its first ack came
        self.answers: list[Answer] = []  # the bot's HTTP answers to post_event
        self.ephemerals: list[Ephemeral] = []
        self.sockets: list[web.WebSocketResponse] = []
        self.connections_opened = 0
        self.socket_down = False  # the Socket Mode endpoint refuses connections (503) while the Web API works
        self.refused = 0  # Socket Mode connections refused while it was down
        self._failures: dict[str, deque[Failure]] = {}
        self.delay: dict[str, float] = {}  # method -> seconds to wait before answering (and acting)
        self._slow: set[asyncio.Future[web.Response]] = set()
        self._ts = itertools.count(1)
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.add_user("U1", "alice", "Alice")

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeSlack:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/socket", self._socket)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files/{file_id}/{name}", self._download)
        app.router.add_post("/_control/push", self._control_push)
        app.router.add_post("/_control/post", self._control_post)
        app.router.add_get("/_control/posts", self._control_posts)
        app.router.add_get("/_control/state", self._control_state)
        self._runner, self.port = await serve(app, self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ws in list(self.sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/api/"

    # ------------------------------------------------------------------ test helpers

    def add_user(self, user_id: str, name: str, display: str = "", *, is_bot: bool = False) -> None:
        self.users[user_id] = {"id": user_id, "name": name, "is_bot": is_bot, "team_id": self.team_id,
                               "profile": {"display_name": display, "real_name": display or name}}

    def add_file(self, name: str, data: bytes, mimetype: str = "application/octet-stream") -> JSON:
        """A file as it appears in a message event's ``files``; downloadable with the bot token."""
        file_id = f"F{len(self.files) + 1:04d}"
        self.files[file_id] = (name, mimetype, data)
        url = f"{self.root}/files/{file_id}/{urllib.parse.quote(name)}"
        return {"id": file_id, "name": name, "mimetype": mimetype, "size": len(data), "mode": "hosted",
                "url_private": url, "url_private_download": url}

    def fail_next(self, method: str, error: str = "ratelimited", *, status: int | None = None,
                  retry_after: int | None = None, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` fail: 429 with ``Retry-After`` for ``ratelimited``."""
        if error == "ratelimited":
            status, retry_after = status or 429, 1 if retry_after is None else retry_after
        failure = Failure(status or 200, error, retry_after)
        self._failures.setdefault(method, deque()).extend([failure] * times)

    def next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.{next(self._ts) % 1_000_000:06d}"

    def message(self, channel: str, text: str, *, user: str = "U1", ts: str | None = None,
                thread_ts: str | None = None, subtype: str | None = None, files: list[JSON] | None = None,
                bot_id: str | None = None, kind: str = "message", **extra: Any) -> JSON:
        """A ``message`` (or ``kind="app_mention"``) event as Slack sends it."""
        event: JSON = {"type": kind, "user": user, "text": text, "ts": ts or self.next_ts(), "channel": channel,
                       "team": self.team_id, "event_ts": ts}
        event["event_ts"] = event["ts"]
        if kind == "message":
            event["channel_type"] = {"D": "im", "G": "group"}.get(channel[0], "channel")
        if thread_ts:
            event["thread_ts"] = thread_ts
        if subtype:
            event["subtype"] = subtype
        if files:
            event["files"] = files
        if bot_id:
            event["bot_id"] = bot_id
        return {**event, **extra}

    def event(self, event: JSON, *, event_id: str | None = None) -> JSON:
        """An Events API ``event_callback`` body around ``event``."""
        return {"token": "legacy", "team_id": self.team_id, "api_app_id": "A0001", "type": "event_callback",
                "event": event, "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
                "event_time": int(time.time()), "authorizations": [
                    {"team_id": self.team_id, "user_id": self.bot_user, "is_bot": True}]}

    def command(self, name: str, channel: str, *, text: str = "", user: str = "U1") -> JSON:
        return {"token": "legacy", "team_id": self.team_id, "channel_id": channel, "channel_name": "x",
                "user_id": user, "user_name": self.users.get(user, {}).get("name", user), "command": name,
                "text": text, "api_app_id": "A0001", "trigger_id": f"{uuid.uuid4().int % 10**12}.1.abc",
                "response_url": f"{self.root}/respond/x"}

    def click(self, post: Post, action_id: str, *, user: str = "U1") -> JSON:
        """A ``block_actions`` payload: ``user`` clicked the button ``action_id`` on ``post``."""
        block, button = next((b, e) for b in post.blocks or () if b.get("type") == "actions" for e in b["elements"]
                             if e.get("action_id") == action_id)
        container = {"type": "message", "message_ts": post.ts, "channel_id": post.channel, "is_ephemeral": False}
        if post.thread_ts:
            container["thread_ts"] = post.thread_ts
        return {"type": "block_actions", "team": {"id": self.team_id}, "user": {"id": user, "name": "alice"},
                "api_app_id": "A0001", "container": container, "trigger_id": "1.2.3",
                "channel": {"id": post.channel}, "message": {"ts": post.ts, "text": post.text},
                "actions": [{**button, "block_id": block.get("block_id") or "x1Y", "action_ts": f"{time.time():.6f}",
                             "type": "button"}]}

    # -- Socket Mode

    async def push(self, payload: JSON, *, kind: str | None = None, retry_attempt: int = 0) -> str:
        """Send an envelope over the bot's WebSocket; its envelope id (see ``wait_for_ack``)."""
        if kind is None:
            kind = {"event_callback": "events_api", "block_actions": "interactive"}.get(
                payload.get("type", ""), "slash_commands")
        envelope_id = str(uuid.uuid4())
        envelope = {"envelope_id": envelope_id, "type": kind, "payload": payload,
                    "accepts_response_payload": kind != "events_api", "retry_attempt": retry_attempt,
                    "retry_reason": "timeout" if retry_attempt else ""}
        for _ in range(200):
            if self.sockets:
                break
            await asyncio.sleep(0.01)
        self.pushed[envelope_id] = time.monotonic()
        await self.sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def refresh(self, reason: str = "refresh_requested") -> None:
        """Slack's periodic ``disconnect`` message: the client should open a new connection."""
        for ws in list(self.sockets):
            await ws.send_str(json.dumps({"type": "disconnect", "reason": reason,
                                          "debug_info": {"host": "fake"}}))

    def ack_delay(self, envelope_id: str) -> float:
        """Seconds from sending the envelope to its ack (Slack wants it within 3)."""
        return self.acked[envelope_id] - self.pushed[envelope_id]

    async def wait_for_ack(self, envelope_id: str, timeout: float = 5.0) -> JSON:
        deadline = time.monotonic() + timeout
        while True:
            found = next((a for a in self.acks if a.get("envelope_id") == envelope_id), None)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ack for {envelope_id}")
            await self._wait_change(deadline)

    # -- Events API

    def sign(self, body: str, *, timestamp: int | None = None, secret: str | None = None) -> dict[str, str]:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = f"v0:{ts}:{body}".encode()
        digest = hmac.new((secret or self.signing_secret).encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}

    async def post_event(self, url: str, payload: JSON, *, retry_num: int | None = None, bad_signature: bool = False,
                         stale: bool = False, form: bool | None = None) -> tuple[int, str]:
        """POST ``payload`` to the bot as Slack would (JSON for events; form for commands and
        ``payload=`` for interactions); (status, body)."""
        if form is None:
            form = payload.get("type") != "event_callback" and payload.get("type") != "url_verification"
        if not form:
            body, ctype = json.dumps(payload), "application/json"
        elif payload.get("type") == "block_actions":
            body, ctype = urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
        else:
            body, ctype = urllib.parse.urlencode(payload), "application/x-www-form-urlencoded"
        headers = {"Content-Type": ctype, **self.sign(body, timestamp=int(time.time()) - 600 if stale else None,
                                                       secret="wrong-secret" if bad_signature else None)}
        if retry_num is not None:
            headers |= {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        started = time.monotonic()
        async with aiohttp.ClientSession() as session, session.post(url, data=body.encode(), headers=headers) as r:
            text = await r.text()
        kind = str(payload.get("type") or ("command" if "command" in payload else ""))
        self.answers.append(Answer(kind, r.status, time.monotonic() - started))
        return r.status, text

    # -- waiting

    async def _wait_change(self, deadline: float) -> None:
        self._changed.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - time.monotonic()))

    async def wait_for(self, predicate: Any, timeout: float = 5.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = predicate()
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake Slack: timed out waiting for {what}")
            await self._wait_change(min(deadline, time.monotonic() + 0.05))

    async def wait_for_posts(self, n: int, timeout: float = 5.0, method: str = "chat.postMessage") -> list[Post]:
        return await self.wait_for(lambda: (lambda p: p if len(p) >= n else None)(
            [p for p in self.posts if p.method == method]), timeout, f"{n} {method}")

    def called(self, method: str) -> list[JSON]:
        return [params for name, params in self.calls if name == method]

    # ------------------------------------------------------------------ Web API

    async def _params(self, request: web.Request) -> JSON:
        params: JSON = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            if request.content_type == "application/json":
                params |= await request.json()
            else:
                params |= dict(await request.post())
        return params

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ") or str(params.pop("token", ""))
        self.calls.append((method, params))
        self._changed.set()
        if self.delay.get(method):  # a slow call lands even when the client has gone away meanwhile
            task = asyncio.ensure_future(self._answer(method, params, token, self.delay[method]))
            self._slow.add(task)
            task.add_done_callback(self._slow.discard)
            return await asyncio.shield(task)
        return await self._answer(method, params, token)

    async def _answer(self, method: str, params: JSON, token: str, delay: float = 0.0) -> web.Response:
        if delay:
            await asyncio.sleep(delay)
        headers: dict[str, str] = {}
        failures = self._failures.get(method)
        if failures:
            f = failures.popleft()
            if f.retry_after is not None:
                headers["Retry-After"] = str(f.retry_after)
            return web.json_response({"ok": False, "error": f.error}, status=f.status, headers=headers)
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            return web.json_response({"ok": False, "error": "invalid_auth" if token else "not_authed"})
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
        try:
            result = handler(params)
        except _Refused as exc:
            return web.json_response({"ok": False, "error": exc.error})
        if method == "auth.test":
            headers["x-oauth-scopes"] = self.scopes
        self._changed.set()
        return web.json_response({"ok": True, **result}, headers=headers)

    def _auth_test(self, params: JSON) -> JSON:
        return {"url": "https://fake.slack.com/", "team": "Fake", "user": "chatgate", "team_id": self.team_id,
                "user_id": self.bot_user, "bot_id": self.bot_id, "is_enterprise_install": False}

    def _apps_connections_open(self, params: JSON) -> JSON:
        self.connections_opened += 1
        return {"url": f"ws://{self.host}:{self.port}/socket?ticket={uuid.uuid4().hex}"}

    def _chat_postMessage(self, params: JSON) -> JSON:
        text, blocks = str(params.get("text") or ""), _blocks(params.get("blocks"))
        if not text and not blocks:
            raise _Refused("no_text")
        if len(text) > MAX_TEXT:
            raise _Refused("msg_too_long")
        channel = str(params["channel"])
        post = Post("chat.postMessage", channel, self.next_ts(), text, params.get("thread_ts") or None, blocks)
        self._record(post)
        return {"channel": channel, "ts": post.ts, "message": {"text": text, "ts": post.ts}}

    def _chat_postEphemeral(self, params: JSON) -> JSON:
        text, user = str(params.get("text") or ""), str(params.get("user") or "")
        if not text and not params.get("blocks"):
            raise _Refused("no_text")
        if user not in self.users:
            raise _Refused("user_not_found")
        self.ephemerals.append(Ephemeral(str(params["channel"]), user, text, params.get("thread_ts") or None))
        return {"message_ts": self.next_ts()}

    def _chat_update(self, params: JSON) -> JSON:
        channel, ts = str(params["channel"]), str(params["ts"])
        old = self.messages.get((channel, ts))
        if old is None:
            raise _Refused("message_not_found")
        text = str(params.get("text") or "")
        if len(text) > MAX_TEXT:
            raise _Refused("msg_too_long")
        blocks = _blocks(params.get("blocks")) if "blocks" in params else old.blocks
        self._record(Post("chat.update", channel, ts, text, old.thread_ts, blocks or None))
        return {"channel": channel, "ts": ts, "text": text}

    def _chat_delete(self, params: JSON) -> JSON:
        key = (str(params["channel"]), str(params["ts"]))
        if self.messages.pop(key, None) is None:
            raise _Refused("message_not_found")
        self.deleted.append(key)
        return {"channel": key[0], "ts": key[1]}

    def _chat_startStream(self, params: JSON) -> JSON:
        channel = str(params["channel"])
        if not params.get("thread_ts"):
            raise _Refused("invalid_arguments")
        if not channel.startswith("D") and not (params.get("recipient_user_id") and params.get("recipient_team_id")):
            raise _Refused("missing_recipient_user_id")
        ts = self.next_ts()
        stream = self.streams[ts] = Stream(channel, ts, str(params["thread_ts"]), time.monotonic())
        stream.text = _chunk_text(params)
        self._record(Post("chat.startStream", channel, ts, stream.text, stream.thread_ts))
        return {"channel": channel, "ts": ts}

    def _live_stream(self, params: JSON) -> Stream:
        stream = self.streams.get(str(params["ts"]))
        if stream is None:
            raise _Refused("message_not_found")
        if stream.state != "streaming" or time.monotonic() - stream.started > self.stream_limit:
            stream.state = "stopped"
            raise _Refused("message_not_in_streaming_state")
        return stream

    def _chat_appendStream(self, params: JSON) -> JSON:
        stream = self._live_stream(params)
        stream.text += _chunk_text(params)
        self._record(Post("chat.appendStream", stream.channel, stream.ts, stream.text, stream.thread_ts))
        return {"channel": stream.channel, "ts": stream.ts}

    def _chat_stopStream(self, params: JSON) -> JSON:
        stream = self._live_stream(params)
        stream.text += _chunk_text(params)
        stream.state = "stopped"
        self._record(Post("chat.stopStream", stream.channel, stream.ts, stream.text, stream.thread_ts))
        return {"channel": stream.channel, "ts": stream.ts, "message": {"text": stream.text}}

    def _reactions_add(self, params: JSON) -> JSON:
        key, name = (str(params["channel"]), str(params["timestamp"])), str(params["name"])
        if name in self.reactions.setdefault(key, set()):
            raise _Refused("already_reacted")
        self.reactions[key].add(name)
        self.reaction_log.append(("add", *key, name))
        return {}

    def _reactions_remove(self, params: JSON) -> JSON:
        key, name = (str(params["channel"]), str(params["timestamp"])), str(params["name"])
        if name not in self.reactions.get(key, set()):
            raise _Refused("no_reaction")
        self.reactions[key].discard(name)
        self.reaction_log.append(("remove", *key, name))
        return {}

    def _assistant_threads_setStatus(self, params: JSON) -> JSON:
        channel = str(params.get("channel_id") or "")
        if not channel.startswith("D") or not params.get("thread_ts"):
            raise _Refused("invalid_channel" if channel else "invalid_arguments")
        self.statuses.append((channel, str(params["thread_ts"]), str(params.get("status") or "")))
        return {}

    def _users_info(self, params: JSON) -> JSON:
        user = self.users.get(str(params.get("user")))
        if user is None:
            raise _Refused("user_not_found")
        return {"user": user}

    def _conversations_info(self, params: JSON) -> JSON:
        channel = str(params.get("channel"))
        return {"channel": {"id": channel, "is_im": channel.startswith("D"), "is_channel": channel.startswith("C"),
                            "name": channel.lower()}}

    def _files_getUploadURLExternal(self, params: JSON) -> JSON:
        file_id = f"FU{len(self.uploads) + 1:04d}"
        self.uploads[file_id] = {"name": params.get("filename"), "length": int(params.get("length") or 0),
                                 "data": None}
        return {"upload_url": f"{self.root}/upload/{file_id}", "file_id": file_id}

    def _files_completeUploadExternal(self, params: JSON) -> JSON:
        files = params.get("files")
        files = json.loads(files) if isinstance(files, str) else files
        out = []
        for f in files:
            upload = self.uploads.get(f["id"])
            if upload is None or upload["data"] is None:
                raise _Refused("file_not_found")
            upload |= {"title": f.get("title"), "channel": params.get("channel_id"),
                       "thread_ts": params.get("thread_ts"), "comment": params.get("initial_comment")}
            out.append({"id": f["id"], "title": f.get("title"), "name": upload["name"]})
            if params.get("channel_id"):
                self._record(Post("files.completeUploadExternal", str(params["channel_id"]), self.next_ts(),
                                  str(params.get("initial_comment") or ""), params.get("thread_ts") or None))
        return {"files": out}

    def _files_info(self, params: JSON) -> JSON:
        return {"file": {"id": params.get("file")}}

    async def _upload(self, request: web.Request) -> web.Response:
        upload = self.uploads.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404)
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            part = next(iter(form.values()))
            upload["data"] = part.file.read() if hasattr(part, "file") else str(part).encode()
        else:
            upload["data"] = await request.read()
        return web.Response(text="OK - " + str(len(upload["data"])))

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            return web.Response(text="<html>sign in</html>", content_type="text/html")
        found = self.files.get(request.match_info["file_id"])
        if found is None:
            return web.Response(status=404)
        self.downloads.append(request.match_info["file_id"])
        return web.Response(body=found[2], content_type=found[1])

    def _record(self, post: Post) -> None:
        self.posts.append(post)
        if post.method in ("chat.postMessage", "chat.update"):
            self.messages[(post.channel, post.ts)] = post
        elif post.method.startswith("chat.") and "Stream" in post.method:
            self.messages[(post.channel, post.ts)] = post
        self._changed.set()

    # ------------------------------------------------------------------ Socket Mode

    async def drop(self) -> None:
        """Close every Socket Mode connection (with a close frame, as Slack's side going away does)."""
        for ws in list(self.sockets):
            await ws.close()

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        if self.socket_down:
            self.refused += 1
            self._changed.set()
            return web.Response(status=503)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": len(self.sockets),
                                      "debug_info": {"host": "fake"}, "connection_info": {"app_id": "A0001"}}))
        self._changed.set()
        try:
            async for frame in ws:
                if frame.type == aiohttp.WSMsgType.TEXT:
                    ack = json.loads(frame.data)
                    self.acks.append(ack)
                    self.acked.setdefault(str(ack.get("envelope_id")), time.monotonic())
                    self._changed.set()
        finally:
            self.sockets.remove(ws)
        return ws

    # ------------------------------------------------------------------ control (bench)

    async def _control_push(self, request: web.Request) -> web.Response:
        body = await request.json()
        ids = [await self.push(p) for p in (body if isinstance(body, list) else [body])]
        return web.json_response({"at": time.monotonic(), "envelope_ids": ids})

    async def _control_post(self, request: web.Request) -> web.Response:
        body = await request.json()
        at = time.monotonic()
        statuses = [(await self.post_event(request.query["url"], p))[0]
                    for p in (body if isinstance(body, list) else [body])]
        return web.json_response({"at": at, "statuses": statuses})

    async def _control_state(self, request: web.Request) -> web.Response:
        return web.json_response({"sockets": len(self.sockets), "connections_opened": self.connections_opened,
                                  "auth_tests": len(self.called("auth.test")), "acks": len(self.acks)})

    async def _control_posts(self, request: web.Request) -> web.Response:
        since, wait = int(request.query.get("since", 0)), float(request.query.get("wait", 0))
        deadline = time.monotonic() + wait
        while len(self.posts) <= since and time.monotonic() < deadline:
            await self._wait_change(deadline)
        return web.json_response([{"method": p.method, "channel": p.channel, "ts": p.ts, "text": p.text,
                                   "thread_ts": p.thread_ts, "at": p.at} for p in self.posts[since:]])


class _Refused(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def _blocks(value: Any) -> list[JSON] | None:
    blocks = json.loads(value) if isinstance(value, str) else value
    for block in blocks or ():
        if block.get("type") == "section" and len(block.get("text", {}).get("text", "")) > MAX_SECTION:
            raise _Refused("invalid_blocks")
        elements = block.get("elements") or () if block.get("type") == "actions" else ()
        action_ids = [e.get("action_id") for e in elements]
        if len(set(action_ids)) != len(action_ids) or any(len(e.get("text", {}).get("text", "")) > 75
                                                          for e in elements):
            raise _Refused("invalid_blocks")
    return blocks or None


def _chunk_text(params: JSON) -> str:
    text = str(params.get("markdown_text") or "")
    chunks = params.get("chunks")
    chunks = json.loads(chunks) if isinstance(chunks, str) else chunks
    for chunk in chunks or ():
        if chunk.get("type") == "markdown_text":
            text += str(chunk.get("text") or "")
    return text


async def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    async with FakeSlack(port=args.port) as slack:
        print(slack.base_url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(_main())
