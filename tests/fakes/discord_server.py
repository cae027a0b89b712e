"""A fake Discord (REST + gateway WebSocket) on 127.0.0.1, so the real discord.py runs in tests.

    async with FakeDiscord() as dc:
        guild = dc.add_guild(channels={"general": 0})      # a guild with a text channel
        # the bot connects to dc.api_base and dc.gateway_url
        dc.dm(user_id=42, text="hi")                        # MESSAGE_CREATE in a DM
        dc.say(guild.channel("general"), 42, f"<@{dc.bot_id}> hi", mentions=[dc.bot_id])
        sent = await dc.wait_for_sent(1)                    # what the bot posted (payloads kept)

It behaves like Discord where tests depend on it: ``{"code", "message", "errors"}`` error
bodies (50035 "Invalid Form Body" for content over 2,000 characters, 10003 unknown
channel), 401 for a wrong token, 429 with ``Retry-After``, ``X-RateLimit-*`` and ``Via``
(without ``Via`` discord.py takes it for a Cloudflare ban), a message reference with
``fail_if_not_exists: false`` to a message that does not exist is sent without it, global
application commands overwritten in bulk, deferred interactions and their original
response, attachments downloadable from a CDN path. Buttons: a message's ``components``
are kept as sent and replaced by an edit that names them (``custom_id`` 1 to 100
characters, a label of at most 80, five buttons a row and five rows, else 50035); ``press``
dispatches the component interaction of a click (``dispatched`` and ``answered`` time it
from dispatch to its callback, which Discord wants within 3 s; a second callback is 40060
"already acknowledged"), follow-ups are recorded in ``followups`` (ephemeral: flag 64).

The gateway speaks JSON, zlib-stream compressed when the client asks (``compress=
zlib-stream``, as discord.py does): HELLO, IDENTIFY -> READY then GUILD_CREATE per guild,
heartbeat ACKs, RESUME (missed events replayed, then RESUMED), INVALID_SESSION for an
unknown session, close 4004 for a bad token and 4014 for a refused privileged intent
(``refuse_intents``; the application's flags then lack GATEWAY_MESSAGE_CONTENT).
``drop()`` closes the connection as a network failure would;
``silence()`` keeps it open but answers nothing, as a half-dead connection does. Events
dispatched while no connection is up are delivered on resume, as Discord does.

Standalone, for benchmarks: ``python -m tests.fakes.discord_server --port 0`` prints the
API base and gateway URL, with a guild and channels ready; ``POST /_control/say`` takes
``{"channel_id", "user_id", "text", "mention": bool}`` (or a list) and answers with the
time they were dispatched; ``GET /_control/sent?since=N[&wait=S]`` lists sent messages;
``POST /_control/drop`` drops the gateway connection; ``GET /_control/state`` counts
identifies, resumes, live connections, typing calls and edits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.serving import serve

JSON = dict[str, Any]
MAX_CONTENT = 2000
EPOCH_MS = 1420070400000  # Discord's snowflake epoch
MESSAGE_CONTENT = 1 << 15
PRIVILEGED = (1 << 1) | (1 << 8) | MESSAGE_CONTENT  # members, presences, message content
APP_MESSAGE_CONTENT = 1 << 18  # the application's flag GATEWAY_MESSAGE_CONTENT: the intent is enabled in the portal


def snowflake(at: float | None = None, n: int = 0) -> int:
    ms = int((time.time() if at is None else at) * 1000) - EPOCH_MS
    return (ms << 22) | (n & 0x3FFFFF)


def _iso(at: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if at is None else at, UTC).isoformat()


@dataclass(slots=True)
class Sent:
    channel_id: int
    message_id: int
    content: str
    payload: JSON  # the JSON body as discord.py sent it (allowed_mentions, message_reference ...)
    files: tuple[tuple[str, bytes], ...] = ()
    at: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class Edit:
    channel_id: int
    message_id: int
    content: str | None
    payload: JSON
    at: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class Followup:
    """A follow-up message to an interaction (``POST /webhooks/{app}/{token}``)."""

    interaction_id: int
    content: str
    flags: int
    payload: JSON
    at: float = field(default_factory=time.monotonic)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & 64)


@dataclass(slots=True)
class Failure:
    status: int
    code: int = 0
    message: str = ""
    retry_after: float | None = None
    via: bool = True
    disconnect: bool = False


@dataclass(slots=True)
class Guild:
    id: int
    name: str
    channels: dict[str, int]  # name -> id (text channels, forums, threads)

    def channel(self, name: str) -> int:
        return self.channels[name]


@dataclass(slots=True)
class _Session:
    id: str
    intents: int
    log: list[JSON] = field(default_factory=list)  # dispatched events, by sequence (resume replays)
    shard: tuple[int, int] = (0, 1)  # (shard id, shard count) from IDENTIFY


def shard_of(guild_id: int | None, count: int) -> int:
    """Discord's rule: a guild's events go to shard (guild_id >> 22) % count; DMs to shard 0."""
    return 0 if guild_id is None else (guild_id >> 22) % count


class _Conn:
    """One gateway WebSocket connection; frames go out in order through one writer task."""

    def __init__(self, ws: web.WebSocketResponse, transport: Any, compress: bool) -> None:
        self.ws = ws
        self.transport = transport
        self.zlib = zlib.compressobj() if compress else None
        self.session: _Session | None = None
        self.silent = False
        self._out: asyncio.Queue[JSON] = asyncio.Queue()
        self.writer = asyncio.ensure_future(self._write())

    def send(self, payload: JSON) -> None:
        if not self.silent:
            self._out.put_nowait(payload)

    async def _write(self) -> None:
        while True:
            payload = await self._out.get()
            if self.silent or self.ws.closed:
                continue
            raw = json.dumps(payload)
            try:
                if self.zlib is None:
                    await self.ws.send_str(raw)
                else:
                    await self.ws.send_bytes(self.zlib.compress(raw.encode()) + self.zlib.flush(zlib.Z_SYNC_FLUSH))
            except (ConnectionError, RuntimeError):
                return


class FakeDiscord:
    """The fake Discord. ``async with FakeDiscord() as dc``; ``port=0`` picks a free port."""

    def __init__(self, *, token: str = "MTAw.fake.bot-token", bot_id: int = 100000000000000001,
                 username: str = "chatgate", host: str = "127.0.0.1", port: int = 0,
                 heartbeat_ms: int = 41250, refuse_intents: int = 0) -> None:
        self.token, self.bot_id, self.username = token, bot_id, username
        self.app_id = bot_id
        self.app_flags: int | None = None  # the application's flags (1 << 18: Message Content on); None: from refuse_intents
        self.host, self.port = host, port
        self.heartbeat_ms = heartbeat_ms
        self.refuse_intents = refuse_intents  # intent bits the portal has not enabled (close 4014)
        self.gateway_down = False  # the gateway refuses connections (503) while REST works
        self.refused = 0  # gateway connections refused while it was down
        self.guilds: dict[int, JSON] = {}
        self.channels: dict[int, JSON] = {}  # id -> channel object (guild channels, threads, DMs)
        self.messages: dict[int, JSON] = {}  # id -> message (every message the fake knows)
        self.sent: list[Sent] = []
        self.edits: list[Edit] = []
        self.typing: list[tuple[int, float]] = []  # (channel id, monotonic time)
        self.commands: list[JSON] = []  # the global application commands
        self.command_puts: list[list[JSON]] = []
        self.command_gets = 0
        self.callbacks: list[tuple[int, JSON]] = []  # interaction callbacks: (interaction id, body)
        self.dispatched: dict[int, float] = {}  # interaction id -> when INTERACTION_CREATE was dispatched
        self.answered: dict[int, float] = {}  # interaction id -> when its (first) callback came
        self.followups: list[Followup] = []
        self.originals: dict[str, JSON] = {}  # interaction token -> its original response message
        self.deleted_originals: list[str] = []
        self.identifies: list[JSON] = []
        self.resumes: list[JSON] = []
        self.connections = 0
        self.compressed = 0  # connections that asked for zlib-stream
        self.requests: list[tuple[str, str]] = []  # (method, path) of every REST call and download
        self.files: dict[str, bytes] = {}
        self._ids = itertools.count(1)
        self._failures: dict[str, list[Failure]] = {}
        self._sessions: dict[str, _Session] = {}
        self._conns: list[_Conn] = []
        self._session: _Session | None = None  # the bot's current session (the latest to identify)
        self._shards: dict[tuple[int, int], _Session] = {}  # (shard id, count) -> its current session
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self._hidden: set[int] = set()  # guilds never announced to the bot

    # ------------------------------------------------------------------ addresses

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.root}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/gateway"

    @property
    def bot_user(self) -> JSON:
        return self.user(self.bot_id, self.username, bot=True)

    @staticmethod
    def user(user_id: int, name: str | None = None, *, bot: bool = False) -> JSON:
        name = name or f"user{user_id}"
        return {"id": str(user_id), "username": name, "global_name": name.title(), "discriminator": "0",
                "avatar": None, "bot": bot, "public_flags": 0}

    def next_id(self) -> int:
        return snowflake(n=next(self._ids))

    # ------------------------------------------------------------------ world

    def add_guild(self, name: str = "Guild", *, channels: dict[str, int] | None = None,
                  threads: dict[str, str] | None = None, guild_id: int | None = None,
                  announce: bool = True) -> Guild:
        """A guild with channels (name -> Discord channel type: 0 text, 5 announcement, 15 forum)
        and threads (name -> parent channel name; a thread in a forum is a forum post).
        Dispatched as GUILD_CREATE when the bot is connected, else sent after READY; with
        ``announce`` false never (a guild still streaming in: the bot's cache lacks it)."""
        gid = guild_id or self.next_id()
        guild = Guild(gid, name, {})
        chans, thrs = [], []
        for cname, ctype in (channels or {"general": 0}).items():
            cid = self.next_id()
            chan = {"id": str(cid), "type": ctype, "guild_id": str(gid), "name": cname, "position": len(chans),
                    "permission_overwrites": [], "nsfw": False, "parent_id": None, "topic": None,
                    "last_message_id": None, "rate_limit_per_user": 0, "flags": 0}
            if ctype == 15:
                chan["available_tags"] = []
            self.channels[cid] = chan
            guild.channels[cname] = cid
            chans.append(chan)
        for tname, parent in (threads or {}).items():
            tid = self.next_id()
            thread = self._thread(tid, gid, guild.channels[parent], tname)
            self.channels[tid] = thread
            guild.channels[tname] = tid
            thrs.append(thread)
        self.guilds[gid] = {
            "id": str(gid), "name": name, "icon": None, "owner_id": "1", "roles": [
                {"id": str(gid), "name": "@everyone", "permissions": "2248473465835073", "position": 0, "color": 0,
                 "hoist": False, "managed": False, "mentionable": False, "flags": 0}],
            "emojis": [], "stickers": [], "features": [], "member_count": 2, "members": [], "channels": chans,
            "threads": thrs, "presences": [], "voice_states": [], "stage_instances": [],
            "guild_scheduled_events": [], "large": False, "unavailable": False, "joined_at": _iso(),
            "premium_tier": 0, "preferred_locale": "en-US", "afk_timeout": 300, "verification_level": 0,
            "default_message_notifications": 0, "explicit_content_filter": 0, "mfa_level": 0, "nsfw_level": 0,
            "system_channel_flags": 0, "premium_progress_bar_enabled": False}
        if not announce:
            self._hidden.add(gid)
        elif self._session is not None:
            self.dispatch("GUILD_CREATE", self.guilds[gid])
        return guild

    def add_thread(self, guild: Guild, name: str, parent: str, *, announce: bool = True) -> int:
        """A thread created while the bot runs (THREAD_CREATE unless ``announce`` is false: then
        the bot learns of it only from the first message, and asks GET /channels/{id})."""
        tid = self.next_id()
        thread = self._thread(tid, guild.id, guild.channels[parent], name)
        self.channels[tid] = thread
        guild.channels[name] = tid
        if announce:
            self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return tid

    @staticmethod
    def _thread(tid: int, gid: int, parent: int, name: str) -> JSON:
        return {"id": str(tid), "type": 11, "guild_id": str(gid), "parent_id": str(parent), "name": name,
                "owner_id": "1", "last_message_id": None, "rate_limit_per_user": 0, "message_count": 0,
                "member_count": 1, "flags": 0,
                "thread_metadata": {"archived": False, "auto_archive_duration": 1440, "locked": False,
                                    "archive_timestamp": _iso(), "create_timestamp": _iso()}}

    def dm_channel(self, user_id: int) -> int:
        if user_id not in self._dm_channels:
            cid = self.next_id()
            self._dm_channels[user_id] = cid
            self.channels[cid] = {"id": str(cid), "type": 1, "last_message_id": None,
                                  "recipients": [self.user(user_id)]}
        return self._dm_channels[user_id]

    def add_file(self, name: str, data: bytes) -> str:
        """Bytes downloadable at the returned CDN-like URL."""
        key = f"{next(self._ids)}/{name}"
        self.files[key] = data
        return f"{self.root}/attachments/{key}"

    # ------------------------------------------------------------------ inbound events

    def message(self, channel_id: int, user_id: int, text: str, *, name: str | None = None,
                mentions: list[int] = (), mention_everyone: bool = False, mention_roles: list[int] = (),
                reply_to: int | None = None, ping: bool = True, attachments: list[JSON] = (), bot: bool = False,
                webhook: bool = False, message_type: int = 0) -> JSON:
        """A user's message as MESSAGE_CREATE carries it (not dispatched: ``dispatch`` or ``say``).
        A reply mentions its author unless ``ping`` is false (Discord's "@ON" toggle). Without the
        Message Content intent, guild messages that do not mention the bot arrive with empty
        content (and no attachments), as on Discord."""
        replied = self.messages.get(reply_to) if reply_to is not None else None
        if replied is not None and ping and int(replied["author"]["id"]) not in mentions:
            mentions = [*mentions, int(replied["author"]["id"])]
        chan = self.channels[channel_id]
        mid = self.next_id()
        msg: JSON = {
            "id": str(mid), "channel_id": str(channel_id), "type": 19 if reply_to else message_type,
            "author": self.user(user_id, name, bot=bot), "content": text, "timestamp": _iso(),
            "edited_timestamp": None, "tts": False, "mention_everyone": mention_everyone,
            "mentions": [self.user(u, self.username if u == self.bot_id else None, bot=u == self.bot_id)
                         for u in mentions],
            "mention_roles": [str(r) for r in mention_roles], "attachments": list(attachments), "embeds": [],
            "pinned": False, "flags": 0, "components": [],
        }
        if "guild_id" in chan:
            msg["guild_id"] = chan["guild_id"]
            msg["member"] = {"roles": [], "joined_at": _iso(), "deaf": False, "mute": False, "flags": 0}
        if webhook:
            msg["webhook_id"] = str(self.next_id())
        if reply_to is not None:
            msg["message_reference"] = {"type": 0, "message_id": str(reply_to), "channel_id": str(channel_id)}
            if reply_to in self.messages:
                msg["referenced_message"] = self.messages[reply_to]
        self.messages[mid] = msg
        return msg

    def attachment(self, name: str, data: bytes, content_type: str | None = None, *,
                   size: int | None = None) -> JSON:
        url = self.add_file(name, data)
        out = {"id": str(self.next_id()), "filename": name, "size": len(data) if size is None else size,
               "url": url, "proxy_url": url}
        if content_type:
            out["content_type"] = content_type
        return out

    def say(self, channel_id: int, user_id: int, text: str, **options: Any) -> JSON:
        """Dispatch a MESSAGE_CREATE of a user's message; the message."""
        msg = self.message(channel_id, user_id, text, **options)
        self.dispatch("MESSAGE_CREATE", msg)
        return msg

    def dm(self, user_id: int, text: str, **options: Any) -> JSON:
        return self.say(self.dm_channel(user_id), user_id, text, **options)

    def slash(self, name: str, channel_id: int, user_id: int) -> JSON:
        """Dispatch an INTERACTION_CREATE for the slash command ``name``; the interaction."""
        command = next((c for c in self.commands if c["name"] == name), {"id": str(self.next_id())})
        interaction = self._interaction(2, channel_id, user_id, {"id": command["id"], "name": name, "type": 1})
        self.dispatch("INTERACTION_CREATE", interaction)
        return interaction

    def press(self, message_id: int | str, custom_id: str, user_id: int) -> JSON:
        """Dispatch the component interaction of ``user_id`` clicking the button ``custom_id`` on
        the message (as it is now); the interaction (``dispatch`` it again to replay it)."""
        msg = self.messages[int(message_id)]
        if custom_id not in self.buttons(message_id):
            raise AssertionError(f"message {message_id} has no button {custom_id!r}")
        interaction = self._interaction(3, int(msg["channel_id"]), user_id,
                                        {"custom_id": custom_id, "component_type": 2})
        interaction["message"] = json.loads(json.dumps(msg))
        self.dispatch("INTERACTION_CREATE", interaction)
        return interaction

    def buttons(self, message_id: int | str) -> list[str]:
        """The custom ids of the buttons the message shows now."""
        rows = self.messages[int(message_id)].get("components") or []
        return [c["custom_id"] for row in rows for c in row.get("components") or () if c.get("type") == 2
                and "custom_id" in c]

    def _interaction(self, kind: int, channel_id: int, user_id: int, data: JSON) -> JSON:
        chan = self.channels[channel_id]
        iid = self.next_id()
        interaction: JSON = {
            "id": str(iid), "application_id": str(self.app_id), "type": kind, "token": f"itoken-{iid}",
            "version": 1, "channel_id": str(channel_id), "channel": chan, "locale": "en-US",
            "app_permissions": "2248473465835073", "attachment_size_limit": 26214400, "entitlements": [],
            "authorizing_integration_owners": {"0": "1"}, "data": data,
        }
        if "guild_id" in chan:
            interaction["guild_id"] = chan["guild_id"]
            interaction["guild_locale"] = "en-US"
            interaction["context"] = 0
            interaction["member"] = {"user": self.user(user_id), "roles": [], "joined_at": _iso(), "deaf": False,
                                     "mute": False, "flags": 0, "permissions": "2248473465835073"}
        else:
            interaction["context"] = 1
            interaction["user"] = self.user(user_id)
        return interaction

    def dispatch(self, event: str, data: JSON, *, session: _Session | None = None) -> None:
        """Send a DISPATCH event to the bot's session (kept for resume while it is away); with
        shards, to the session of the shard the event's guild belongs to (DMs: shard 0)."""
        session = session or self._route(data)
        if session is None:
            raise RuntimeError("no gateway session yet: the bot has not identified")
        if event == "MESSAGE_CREATE" and not session.intents & MESSAGE_CONTENT and "guild_id" in data:
            # Content only where the bot is mentioned (a reply that pings it counts, one that does not
            # ping does not), as Discord does without the Message Content intent.
            addressed = any(m["id"] == str(self.bot_id) for m in data["mentions"])
            if not addressed and data["author"]["id"] != str(self.bot_id):
                data = {**data, "content": "", "attachments": [], "embeds": []}
        payload = {"op": 0, "t": event, "s": len(session.log) + 1, "d": data}
        if event == "INTERACTION_CREATE":
            self.dispatched.setdefault(int(data["id"]), time.monotonic())
        session.log.append(payload)
        for conn in self._conns:
            if conn.session is session:
                conn.send(payload)

    def _route(self, data: JSON) -> _Session | None:
        if not self._shards or self._session is None:
            return self._session
        count = self._session.shard[1]
        guild = data.get("guild_id") if isinstance(data, dict) else None
        if guild is None and isinstance(data, dict) and "roles" in data and "channels" in data:
            guild = data.get("id")  # GUILD_CREATE is the guild itself
        return self._shards.get((shard_of(int(guild) if guild else None, count), count))

    # ------------------------------------------------------------------ connection faults

    def drop(self) -> None:
        """Close every gateway connection without a close frame, as a network failure does."""
        for conn in list(self._conns):
            if conn.transport is not None:
                conn.transport.abort()

    def silence(self) -> None:
        """Keep the current connections open but send nothing more on them: no ACK, no event."""
        for conn in self._conns:
            conn.silent = True

    def fail_next(self, route: str, status: int = 429, *, code: int = 0, message: str = "",
                  retry_after: float | None = None, via: bool = True, disconnect: bool = False,
                  times: int = 1) -> None:
        """The next ``times`` requests to ``route`` ("POST /channels/{id}/messages" with the real
        id, or "POST messages" for any channel) fail with ``status``."""
        if status == 429 and retry_after is None:
            retry_after = 0.2
        failure = Failure(status, code, message, retry_after, via, disconnect)
        self._failures.setdefault(route, []).extend([failure] * times)

    @property
    def live(self) -> int:
        """Open gateway connections that are not silenced."""
        return sum(1 for c in self._conns if not c.silent and not c.ws.closed)

    # ------------------------------------------------------------------ waiting

    async def wait_for(self, check: Callable[[], Any], timeout: float = 10.0) -> Any:
        async with asyncio.timeout(timeout):
            while not (result := check()):
                self._changed.clear()
                await self._changed.wait()
        return result

    async def wait_for_sent(self, n: int, timeout: float = 10.0) -> list[Sent]:
        await self.wait_for(lambda: len(self.sent) >= n, timeout)
        return self.sent[:n]

    async def wait_connected(self, n: int = 1, timeout: float = 10.0) -> None:
        """Until the bot has identified or resumed ``n`` times in all and is live."""
        await self.wait_for(lambda: len(self.identifies) + len(self.resumes) >= n and self.live, timeout)

    def _poke(self) -> None:
        self._changed.set()

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(middlewares=[self._middleware])
        r = app.router
        api = "/api/v10"
        r.add_get("/gateway", self._gateway)
        r.add_get(f"{api}/users/@me", self._me)
        r.add_get(f"{api}/oauth2/applications/@me", self._application)
        r.add_get(f"{api}/gateway", self._get_gateway)
        r.add_get(f"{api}/gateway/bot", self._get_gateway)
        r.add_get(api + "/channels/{cid}", self._get_channel)
        r.add_post(api + "/channels/{cid}/messages", self._create_message)
        r.add_patch(api + "/channels/{cid}/messages/{mid}", self._edit_message)
        r.add_post(api + "/channels/{cid}/typing", self._typing)
        r.add_get(api + "/applications/{app}/commands", self._get_commands)
        r.add_put(api + "/applications/{app}/commands", self._put_commands)
        r.add_post(api + "/interactions/{iid}/{token}/callback", self._callback)
        r.add_post(api + "/webhooks/{app}/{token}", self._followup)
        r.add_patch(api + "/webhooks/{app}/{token}/messages/@original", self._edit_original)
        r.add_delete(api + "/webhooks/{app}/{token}/messages/@original", self._delete_original)
        r.add_get("/attachments/{key:.+}", self._download)
        r.add_post("/_control/say", self._control_say)
        r.add_get("/_control/sent", self._control_sent)
        r.add_post("/_control/drop", self._control_drop)
        r.add_get("/_control/state", self._control_state)
        self._runner, self.port = await serve(app, self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for conn in list(self._conns):
            with contextlib.suppress(Exception):
                await conn.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ REST plumbing

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                          ) -> web.StreamResponse:
        path = request.path
        if path.startswith("/_control/"):
            return await handler(request)
        self.requests.append((request.method, path.removeprefix("/api/v10")))
        if not path.startswith("/api/"):
            return await handler(request)
        if not path.startswith("/api/v10/interactions/") and "/webhooks/" not in path:
            if request.headers.get("Authorization") != f"Bot {self.token}":
                return self._error(401, 0, "401: Unauthorized")
        route = f"{request.method} {path.removeprefix('/api/v10')}"
        generic = f"{request.method} {path.rsplit('/', 1)[-1]}"
        for key in (route, generic):
            queue = self._failures.get(key)
            if queue:
                failure = queue.pop(0)
                if failure.disconnect:
                    assert request.transport is not None
                    request.transport.abort()
                    raise ConnectionResetError
                return self._fail(failure)
        try:
            return await handler(request)
        finally:
            self._poke()

    @staticmethod
    def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        # Rate-limit headers as Discord sends them, with room to spare: the fake limits only when
        # a test injects a 429 (``fail_next``).
        base = {"X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "999", "X-RateLimit-Reset-After": "1.0",
                "X-RateLimit-Bucket": "fakebucket", "Via": "1.1 google"}
        # discord.py parses a body only when the type is exactly "application/json" (no charset).
        return web.Response(body=json.dumps(data).encode(), status=status,
                            headers={**base, **(headers or {}), "Content-Type": "application/json"})

    def _error(self, status: int, code: int, message: str, errors: JSON | None = None) -> web.Response:
        body: JSON = {"code": code, "message": message}
        if errors:
            body["errors"] = errors
        return self._json(body, status)

    def _fail(self, failure: Failure) -> web.Response:
        if failure.status == 429:
            body = {"message": "You are being rate limited.", "retry_after": failure.retry_after, "global": False,
                    "code": 0}
            headers = {"Retry-After": f"{failure.retry_after}", "X-RateLimit-Remaining": "0",
                       "X-RateLimit-Reset-After": f"{failure.retry_after}", "X-RateLimit-Scope": "user"}
            response = self._json(body, 429, headers)
            if not failure.via:
                del response.headers["Via"]
            return response
        return self._error(failure.status, failure.code, failure.message or f"{failure.status}: fake failure")

    async def _body(self, request: web.Request) -> tuple[JSON, tuple[tuple[str, bytes], ...]]:
        if request.content_type.startswith("multipart/"):
            payload: JSON = {}
            files: list[tuple[str, bytes]] = []
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    payload = json.loads(await part.text())
                else:
                    files.append((part.filename or "", bytes(await part.read())))
            return payload, tuple(files)
        return (await request.json() if request.can_read_body else {}), ()

    # ------------------------------------------------------------------ REST handlers

    async def _me(self, _: web.Request) -> web.Response:
        return self._json({**self.bot_user, "verified": True, "mfa_enabled": False, "flags": 0})

    async def _application(self, _: web.Request) -> web.Response:
        return self._json({
            "id": str(self.app_id), "name": self.username, "icon": None, "description": "", "bot_public": True,
            "bot_require_code_grant": False, "owner": self.user(1, "owner"), "verify_key": "00" * 32,
            "flags": self.app_flags if self.app_flags is not None else
            0 if self.refuse_intents & MESSAGE_CONTENT else APP_MESSAGE_CONTENT,
            "team": None, "summary": ""})

    async def _get_gateway(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        bot = request.path.endswith("/bot")
        return self._json({"url": self.gateway_url, **({"shards": 1, "session_start_limit": limit} if bot else {})})

    async def _get_channel(self, request: web.Request) -> web.Response:
        chan = self.channels.get(int(request.match_info["cid"]))
        if chan is None:
            return self._error(404, 10003, "Unknown Channel")
        return self._json(chan)

    async def _create_message(self, request: web.Request) -> web.Response:
        cid = int(request.match_info["cid"])
        if cid not in self.channels:
            return self._error(404, 10003, "Unknown Channel")
        payload, files = await self._body(request)
        content = payload.get("content") or ""
        if len(content) > MAX_CONTENT:
            return self._error(400, 50035, "Invalid Form Body", {"content": {"_errors": [
                {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {MAX_CONTENT} or fewer in length."}]}})
        if not content and not files:
            return self._error(400, 50006, "Cannot send an empty message")
        if (refused := self._components_refused(payload)) is not None:
            return refused
        reference = payload.get("message_reference")
        if reference is not None and int(reference["message_id"]) not in self.messages:
            if reference.get("fail_if_not_exists", True):
                return self._error(400, 50035, "Invalid Form Body", {"message_reference": {"_errors": [
                    {"code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "message": "Unknown message"}]}})
            reference = None
        msg = self._bot_message(cid, content, reference, files)
        msg["components"] = payload.get("components") or []
        self.sent.append(Sent(cid, int(msg["id"]), content, payload, files))
        return self._json(msg)

    def _bot_message(self, cid: int, content: str, reference: JSON | None,
                     files: tuple[tuple[str, bytes], ...] = ()) -> JSON:
        mid = self.next_id()
        msg: JSON = {"id": str(mid), "channel_id": str(cid), "type": 19 if reference else 0, "author": self.bot_user,
                     "content": content, "timestamp": _iso(), "edited_timestamp": None, "tts": False,
                     "mention_everyone": False, "mentions": [], "mention_roles": [], "embeds": [], "pinned": False,
                     "flags": 0, "components": [],
                     "attachments": [{"id": str(self.next_id()), "filename": name, "size": len(data),
                                      "url": self.add_file(name, data), "proxy_url": ""} for name, data in files]}
        if "guild_id" in self.channels.get(cid, {}):
            msg["guild_id"] = self.channels[cid]["guild_id"]
        if reference is not None:
            msg["message_reference"] = {"type": 0, "message_id": reference["message_id"], "channel_id": str(cid)}
        self.messages[mid] = msg
        return msg

    async def _edit_message(self, request: web.Request) -> web.Response:
        cid, mid = int(request.match_info["cid"]), int(request.match_info["mid"])
        msg = self.messages.get(mid)
        if msg is None or int(msg["channel_id"]) != cid:
            return self._error(404, 10008, "Unknown Message")
        if msg["author"]["id"] != str(self.bot_id):
            return self._error(403, 50005, "Cannot edit a message authored by another user")
        payload, _ = await self._body(request)
        content = payload.get("content")
        if content is not None and len(content) > MAX_CONTENT:
            return self._error(400, 50035, "Invalid Form Body", {"content": {"_errors": [
                {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {MAX_CONTENT} or fewer in length."}]}})
        if (refused := self._components_refused(payload)) is not None:
            return refused
        if content is not None:
            msg["content"] = content
        if "components" in payload:
            msg["components"] = payload["components"] or []
        msg["edited_timestamp"] = _iso()
        self.edits.append(Edit(cid, mid, content, payload))
        return self._json(msg)

    def _components_refused(self, payload: JSON) -> web.Response | None:
        """Discord's 50035 for action rows it would refuse; None when they are fine (or absent)."""
        rows = payload.get("components") or []
        buttons = [c for row in rows for c in row.get("components") or ()]
        ids = [b["custom_id"] for b in buttons if "custom_id" in b]
        if (len(rows) > 5 or any(len(row.get("components") or ()) > 5 for row in rows)
                or len(set(ids)) != len(ids) or any(not 1 <= len(i) <= 100 for i in ids)
                or any(len(b.get("label") or "") > 80 for b in buttons)):
            return self._error(400, 50035, "Invalid Form Body", {"components": {"_errors": [
                {"code": "COMPONENT_INVALID", "message": "Invalid components"}]}})
        return None

    async def _typing(self, request: web.Request) -> web.Response:
        cid = int(request.match_info["cid"])
        if cid not in self.channels:
            return self._error(404, 10003, "Unknown Channel")
        self.typing.append((cid, time.monotonic()))
        return web.Response(status=204)

    async def _get_commands(self, _: web.Request) -> web.Response:
        self.command_gets += 1
        return self._json(self.commands)

    async def _put_commands(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.command_puts.append(body)
        # Discord adds ids and versions, and leaves out some keys whose value is the default.
        self.commands = [{k: v for k, v in {**c, "id": str(self.next_id()), "application_id": str(self.app_id),
                                           "version": str(self.next_id())}.items()
                          if not (k == "nsfw" and v is False)} for c in body]
        return self._json(self.commands)

    async def _callback(self, request: web.Request) -> web.Response:
        body = await request.json()
        iid, token = int(request.match_info["iid"]), request.match_info["token"]
        self.callbacks.append((iid, body))
        if iid in self.answered:
            return self._error(400, 40060, "Interaction has already been acknowledged.")
        self.answered[iid] = time.monotonic()
        original = None
        if body.get("type") in (4, 5):
            data = body.get("data") or {}
            original = self._bot_message(self._interaction_channel(token), data.get("content", ""), None)
            self.originals[token] = original
        if request.query.get("with_response") not in ("1", "true"):
            return web.Response(status=204)
        resource: JSON = {"type": body.get("type")}
        if original is not None:
            resource["message"] = original
        return self._json({"interaction": {
            "id": str(iid), "type": self._interaction_of(token)["type"],
            "response_message_id": original and original["id"],
            "response_message_loading": body.get("type") == 5, "response_message_ephemeral": False},
            "resource": resource})

    def _interaction_channel(self, token: str) -> int:
        return int(self._interaction_of(token)["channel_id"])

    def _interaction_of(self, token: str) -> JSON:
        iid = int(token.removeprefix("itoken-"))
        for session in self._sessions.values():
            for event in session.log:
                if event["t"] == "INTERACTION_CREATE" and int(event["d"]["id"]) == iid:
                    return dict(event["d"])
        raise web.HTTPNotFound

    async def _followup(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        interaction = self._interaction_of(token)
        if int(interaction["id"]) not in self.answered:
            return self._error(404, 10015, "Unknown Webhook")  # Discord: a follow-up needs an answered interaction
        payload, files = await self._body(request)
        content = payload.get("content") or ""
        if len(content) > MAX_CONTENT:
            return self._error(400, 50035, "Invalid Form Body")
        self.followups.append(Followup(int(interaction["id"]), content, int(payload.get("flags") or 0), payload))
        if request.query.get("wait") not in ("1", "true"):
            return web.Response(status=204)
        msg = self._bot_message(int(interaction["channel_id"]), content, None, files)
        msg["flags"] = int(payload.get("flags") or 0)
        msg["webhook_id"] = str(self.app_id)
        return self._json(msg)

    async def _edit_original(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        msg = self.originals.get(token)
        if msg is None:
            return self._error(404, 10015, "Unknown Webhook")
        payload, files = await self._body(request)
        content = payload.get("content")
        if content is not None and len(content) > MAX_CONTENT:
            return self._error(400, 50035, "Invalid Form Body")
        if content is not None:
            msg["content"] = content
        self.edits.append(Edit(int(msg["channel_id"]), int(msg["id"]), content, payload))
        self.sent.append(Sent(int(msg["channel_id"]), int(msg["id"]), content or "", payload, files))
        return self._json(msg)

    async def _delete_original(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        if self.originals.pop(token, None) is None:
            return self._error(404, 10015, "Unknown Webhook")
        self.deleted_originals.append(token)
        return web.Response(status=204)

    async def _download(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["key"])
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    # ------------------------------------------------------------------ gateway

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        if self.gateway_down:
            self.refused += 1
            self._poke()
            return web.Response(status=503, text="upstream connect error")
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        conn = _Conn(ws, request.transport, request.query.get("compress") == "zlib-stream")
        self._conns.append(conn)
        self.connections += 1
        self.compressed += conn.zlib is not None
        try:
            conn.send({"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}, "s": None, "t": None})
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                if conn.silent:
                    continue  # a half-dead connection: reads, never answers
                await self._gateway_op(conn, json.loads(frame.data))
        finally:
            conn.writer.cancel()
            self._conns.remove(conn)
            self._poke()
        return ws

    async def _gateway_op(self, conn: _Conn, msg: JSON) -> None:
        op, data = msg.get("op"), msg.get("d")
        if op == 1:
            conn.send({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            await self._identify(conn, data)
        elif op == 6:
            await self._resume(conn, data)
        self._poke()

    async def _identify(self, conn: _Conn, data: JSON) -> None:
        self.identifies.append(data)
        if data.get("token") != self.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        intents = int(data.get("intents", 0))
        if intents & self.refuse_intents:
            await conn.ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        shard = data.get("shard") or [0, 1]
        session = _Session(f"session-{next(self._ids)}", intents, shard=(int(shard[0]), int(shard[1])))
        self._sessions[session.id] = session
        self._session = conn.session = session
        if data.get("shard"):
            self._shards[session.shard] = session
        shown = [g for g in self.guilds if g not in self._hidden and shard_of(g, session.shard[1]) == session.shard[0]]
        ready = {"v": 10, "user": self.bot_user, "guilds": [{"id": str(g), "unavailable": True} for g in shown],
                 "session_id": session.id, "resume_gateway_url": self.gateway_url, "shard": list(session.shard),
                 "application": {"id": str(self.app_id), "flags": 0}}
        self.dispatch("READY", ready, session=session)
        for gid in shown:
            self.dispatch("GUILD_CREATE", self.guilds[gid], session=session)

    async def _resume(self, conn: _Conn, data: JSON) -> None:
        self.resumes.append(data)
        session = self._sessions.get(data.get("session_id", ""))
        if data.get("token") != self.token or session is None:
            conn.send({"op": 9, "d": False, "s": None, "t": None})
            return
        conn.session = session
        self._session = session
        if session.shard != (0, 1):
            self._shards[session.shard] = session
        for event in session.log[int(data.get("seq") or 0):]:
            conn.send(event)
        session.log.append({"op": 0, "t": "RESUMED", "s": len(session.log) + 1, "d": {}})
        conn.send(session.log[-1])

    # ------------------------------------------------------------------ control (benchmarks)

    async def _control_say(self, request: web.Request) -> web.Response:
        body = await request.json()
        for item in body if isinstance(body, list) else [body]:
            cid, uid = int(item["channel_id"]), int(item["user_id"])
            text = item["text"]
            if item.get("mention"):
                self.say(cid, uid, f"<@{self.bot_id}> {text}", mentions=[self.bot_id])
            else:
                self.say(cid, uid, text)
        return web.json_response({"at": time.monotonic()})

    async def _control_sent(self, request: web.Request) -> web.Response:
        since = int(request.query.get("since", 0))
        wait = float(request.query.get("wait", 0))
        if wait:
            with contextlib.suppress(TimeoutError):
                await self.wait_for(lambda: len(self.sent) > since, wait)
        return web.json_response([{"channel_id": s.channel_id, "message_id": s.message_id, "content": s.content,
                                   "at": s.at} for s in self.sent[since:]])

    async def _control_drop(self, _: web.Request) -> web.Response:
        self.drop()
        return web.json_response({"at": time.monotonic()})

    async def _control_state(self, _: web.Request) -> web.Response:
        return web.json_response({"identifies": len(self.identifies), "resumes": len(self.resumes),
                                  "live": self.live, "typing": len(self.typing), "edits": len(self.edits)})


async def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--channels", type=int, default=20)
    args = parser.parse_args()
    async with FakeDiscord(port=args.port) as dc:
        guild = dc.add_guild("bench", channels={f"c{i}": 0 for i in range(args.channels)})
        print(json.dumps({"api_base": dc.api_base, "gateway_url": dc.gateway_url, "token": dc.token,
                          "guild": str(guild.id), "bot_id": str(dc.bot_id),
                          "channels": {k: str(v) for k, v in guild.channels.items()}}), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(_main())
