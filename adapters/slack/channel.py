"""The Slack channel on slack-bolt (``AsyncApp``) and slack_sdk: Socket Mode or HTTP events in,
mrkdwn out.

Every event is mapped (``inbound``), handed to the core's inbox, and acknowledged only once
the inbox returned (bolt runs with ``process_before_response``: the ack is the listener's
last step, so a message that could not be stored is not acknowledged and Slack sends it
again). Web API calls make one attempt: slack_sdk's retry handlers are off, so a send is
never made twice by the SDK; delivery retries, after ``Retry-After`` on a 429.

Questions (``Asks``): ``ask`` posts Block Kit buttons (``blocks.question_blocks``); a press
is a ``block_actions`` interaction, through Socket Mode or posted (form-encoded
``payload=``) to the same Request URL as events, acknowledged once stored like every
event (well within Slack's 3 s); ``answer_press`` is an ephemeral message to the presser,
``close_question`` replaces the question with its outcome, without buttons.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.middleware.authorization.async_single_team_authorization import AsyncSingleTeamAuthorization
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import commands, endpoint, inbound
from adapters.slack.blocks import question_blocks, sections, stop_blocks
from adapters.slack.config import SlackConfig
from adapters.slack.dialect import SHAPE as DIALECT_SHAPE
from adapters.slack.errors import error_code, send_failed
from adapters.slack.inbound import ASK_BLOCK, STOP_BUTTON, Me, Options
from adapters.slack.progress import STREAM_ROLLOVER, SlackStream, StatusBoard
from bot.channels import Choice, Dialect, Inbox, Lifecycle, LiveDraft, SendFailed, Status, Streaming, Target
from bot.errors import ChannelError
from bot.messages import Attachment, ChatType, InboundMessage

log = logging.getLogger(__name__)

UPLOAD_LIMIT = 1024 * 1024 * 1024  # Slack takes files up to 1 GB
SHAPE = replace(DIALECT_SHAPE, max_chunks=8, edit_every=1.0, status_every=10.0, max_upload=UPLOAD_LIMIT)
NEEDED_SCOPES = ("chat:write", "app_mentions:read", "im:history", "reactions:write", "users:read")
PARTICIPATION = 24 * 3600.0  # seconds a thread the bot answered in stays addressed
PING_INTERVAL = 10.0  # bolt's own: a dropped Socket Mode connection is noticed and opened again within it
NAME_LOOKUP = 1.5  # seconds users.info may take inside Slack's 3 s ack window
MAX_LOOKUPS = 10  # users looked up for one message; the others stay ids
_REMEMBERED = 4096
REFUSED = frozenset({"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                     "not_allowed_token_type"})


def _bounded_put(d: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    d[key] = value
    d.move_to_end(key)
    while len(d) > _REMEMBERED:
        d.popitem(last=False)


class SlackChannel:
    name = "slack"
    shape = SHAPE

    def __init__(self, config: SlackConfig, dialect: Dialect, *, clock: Callable[[], float] = time.monotonic,
                 stream_rollover: float = STREAM_ROLLOVER, ping_interval: float = PING_INTERVAL) -> None:
        if config.bot_token is None:
            raise ChannelError("channels.slack.bot_token: missing (set SLACK_BOT_TOKEN)")
        self._token = config.bot_token.get_secret_value()
        self.config, self.dialect, self._clock = config, dialect, clock
        self.streaming: Streaming = config.streaming  # read by the core's progress: native | edit | off
        self._rollover = stream_rollover  # seconds before a fresh stream (tests shorten it)
        self._ping = ping_interval  # Socket Mode: seconds between pings, and between reconnection attempts
        self._options = Options(reply_in_thread=config.reply_in_thread,
                                allowed_bots=frozenset(config.allow_from))
        self._inbox: Inbox | None = None
        self._me = Me("")
        self._bot_names: tuple[str, ...] = ()
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._status: StatusBoard | None = None
        self._socket: Any = None  # bolt's AsyncSocketModeHandler
        self._runner: web.AppRunner | None = None
        self._life = Lifecycle()
        self._names: OrderedDict[str, str] = OrderedDict()
        self._threads: OrderedDict[tuple[str, str], float] = OrderedDict()  # where the bot posted -> when
        self._senders: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()  # (chat, ts) -> (user, team)
        self._buttons: dict[tuple[str, str], tuple[str, str]] = {}  # run key -> (message ts, its text)
        self.port: int | None = None  # the HTTP port bound (mode: http)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def client(self) -> AsyncWebClient:
        assert self._client is not None, "start() first"
        return self._client

    async def start(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._life.open()
        self._session = aiohttp.ClientSession()
        try:
            self._client = AsyncWebClient(token=self._token,
                                          base_url=self.config.base_url, session=self._session, retry_handlers=[])
            self._status = StatusBoard(self._client, clock=self._clock)
            auth = await self._auth_test()
            app = self._bolt(auth)
            if self.config.mode == "http":
                await self._serve_http(app)
            else:
                await self._connect_socket(app)
        except BaseException:
            await self.stop()
            raise
        log.info("slack: connected as %s in team %s (%s)", self._me.user_id, self._me.team_id, self.config.mode)

    async def _auth_test(self) -> Any:
        try:
            auth = await self.client.auth_test()
        except SlackApiError as exc:
            code = error_code(exc)
            raise ChannelError(f"channels.slack.bot_token: Slack refused the token ({code}; check "
                               "SLACK_BOT_TOKEN, the Bot User OAuth Token xoxb-…)") from None
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise ChannelError(f"channels.slack.base_url: cannot reach {self.config.base_url} ({exc})") from None
        scopes = auth.headers.get("x-oauth-scopes") or auth.headers.get("X-OAuth-Scopes")
        if scopes is not None:
            have = {s.strip() for s in scopes.split(",")}
            missing = [s for s in NEEDED_SCOPES if s not in have]
            if missing:
                raise ChannelError(f"channels.slack.bot_token: the app lacks the scope {', '.join(missing)} "
                                   "(add it under OAuth & Permissions > Bot Token Scopes and reinstall the app)")
        self._me = Me(str(auth["user_id"]), str(auth.get("bot_id") or ""), str(auth.get("team_id") or ""))
        self._bot_names = (str(auth["user"]),) if auth.get("user") else ()
        return auth

    def names(self) -> tuple[str, ...]:
        """The bot's user name in the workspace, for an audio clip that calls it by name (``Named``)."""
        return self._bot_names

    def _bolt(self, auth: Any) -> AsyncApp:
        http = self.config.mode == "http"
        secret = self.config.signing_secret.get_secret_value() if self.config.signing_secret else None
        if http and not secret:
            raise ChannelError("channels.slack.signing_secret: required for mode: http (set SLACK_SIGNING_SECRET)")
        app = AsyncApp(client=self.client, signing_secret=secret, process_before_response=True,
                       request_verification_enabled=http, logger=logging.getLogger("slack_bolt.chatgate"))
        for middleware in app._async_middleware_list:  # one auth.test, ours, not one more on the first event
            if isinstance(middleware, AsyncSingleTeamAuthorization):
                middleware.auth_test_result = auth

        async def on_message(event: dict[str, Any], ack: Any) -> None:
            msg = await self._map(event)
            if msg is not None:
                await self._deliver(msg)
            await ack()

        async def on_command(command: dict[str, Any], ack: Any) -> None:
            name, args = commands.route(str(command.get("command") or ""), str(command.get("text") or ""),
                                        command=self.config.command, prefix=self.config.command_prefix)
            msg = inbound.command_of(command, self._me, name=name, args=args,
                                     thread_id=self._thread_for_command(command))
            await self._deliver(msg)
            await ack()

        async def on_stop_button(body: dict[str, Any], ack: Any) -> None:
            msg = inbound.stop_button_of(body, self._me)
            if msg is not None:
                await self._deliver(msg)
            await ack()

        async def on_press(body: dict[str, Any], ack: Any) -> None:
            msg = inbound.press_of(body, self._me)
            if msg is not None:
                await self._deliver(msg)
            await ack()

        async def on_other(ack: Any) -> None:
            await ack()

        app.event("message")(on_message)
        app.event("app_mention")(on_message)
        app.command(f"/{self.config.command}")(on_command)  # /chatgate <command> [args]
        for name in commands.direct(self.config.command_prefix):
            if name != self.config.command:
                app.command(f"/{name}")(on_command)
        app.action(STOP_BUTTON)(on_stop_button)
        app.action({"block_id": ASK_BLOCK})(on_press)
        app.event(re.compile(".*"))(on_other)
        return app

    async def _deliver(self, msg: InboundMessage) -> None:
        assert self._inbox is not None
        await self._inbox(msg)

    async def _serve_http(self, app: AsyncApp) -> None:
        assert self.config.signing_secret is not None  # _bolt refused mode: http without it
        self._runner = endpoint.runner(app, self.config.signing_secret.get_secret_value(), self.config.http.path)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.config.http.listen, self.config.http.port).start()
        except OSError as exc:
            raise ChannelError(f"channels.slack.http.port: cannot listen on {self.config.http.listen}:"
                               f"{self.config.http.port} ({exc.strerror or exc})") from None
        self.port = self._runner.addresses[0][1]

    async def _connect_socket(self, app: AsyncApp) -> None:
        from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

        if self.config.app_token is None:
            raise ChannelError("channels.slack.app_token: required for mode: socket (set SLACK_APP_TOKEN)")
        token = self.config.app_token.get_secret_value()
        try:  # our own first apps.connections.open: a refused app token stops here, with its key
            opened = await self.client.apps_connections_open(app_token=token)
        except SlackApiError as exc:
            raise ChannelError(f"channels.slack.app_token: Slack refused the app-level token ({error_code(exc)}; "
                               "check SLACK_APP_TOKEN, an xapp-… token with connections:write)") from None
        self._socket = AsyncSocketModeHandler(app, app_token=token, web_client=self.client, ping_interval=self._ping,
                                              logger=logging.getLogger("slack_sdk.socket_mode.chatgate"))
        client = self._socket.client
        issue = client.issue_new_wss_url

        async def reconnect_url() -> str:  # each reconnection: a refused app token stops the channel
            try:
                return str(await issue())
            except SlackApiError as exc:
                if error_code(exc) in REFUSED:
                    self._fail(ChannelError("channels.slack.app_token: Slack refused the app-level token on "
                                            f"reconnecting ({error_code(exc)}; check SLACK_APP_TOKEN)"))
                raise

        client.issue_new_wss_url = reconnect_url
        client.wss_uri = opened["url"]
        await self._socket.connect_async()

    async def stop(self) -> None:
        if self._socket is not None:
            socket, self._socket = self._socket, None
            await socket.close_async()
            await socket.client.aiohttp_client_session.close()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
        self._life.close()

    def command_text(self, name: str) -> str:
        """``SpellsCommands``: ``/stop`` where Slack leaves the name to apps, else ``/chatgate status``."""
        return commands.spelled(name, command=self.config.command, prefix=self.config.command_prefix)

    def _send_failed(self, exc: Exception, what: str) -> SendFailed:
        """The ``SendFailed`` for a failed send; a token Slack now refuses also stops the channel
        (the send stays pending, for the restart with a good token)."""
        if isinstance(exc, SlackApiError) and error_code(exc) in REFUSED:
            self._fail(ChannelError(f"channels.slack.bot_token: Slack refused the token ({error_code(exc)}; "
                                    "check SLACK_BOT_TOKEN)"))
            return SendFailed(f"{what}: {error_code(exc)}")
        return send_failed(exc, what)

    def _fail(self, error: ChannelError) -> None:
        self._life.fail(error)

    async def wait_closed(self) -> None:
        await self._life.wait()

    def trouble(self) -> str | None:
        """Readiness (``Connects``): None while Socket Mode is connected, or the HTTP endpoint listens."""
        if self.config.mode == "http":
            return None if self._runner is not None and self.port is not None else "the endpoint is not listening"
        client = self._socket.client if self._socket is not None else None
        session = client.current_session if client is not None and not (client.closed or client.stale) else None
        return None if session is not None and not session.closed else "Socket Mode is not connected"

    # -- inbound -----------------------------------------------------------------------

    async def _map(self, event: dict[str, Any]) -> InboundMessage | None:
        if inbound.is_ignored(event, self._me, self._options):
            return None
        chat, thread = str(event.get("channel") or ""), event.get("thread_ts")
        names: dict[str, str] = {}
        if inbound.may_be_heard(event, self.config):  # no users.info for a channel the bot ignores
            users = [event.get("user") or "", *inbound.mentions(str(event.get("text") or ""))]
            names = await self._lookup([u for u in users if u and u != self._me.user_id])
        running = thread is not None and (chat, thread) in (self._status.live if self._status else {})
        msg = inbound.to_inbound(event, self._me, names=names, participating=self._participates(chat, thread),
                                 running=running, options=self._options)
        if msg is not None:
            _bounded_put(self._senders, (chat, msg.message_id), (msg.sender.id, str(event.get("team") or
                                                                                   self._me.team_id)))
            if msg.addressed and msg.thread_id and msg.chat_type is ChatType.GROUP:
                self._participated(chat, msg.thread_id)
        return msg

    def _participates(self, chat: str, thread: str | None) -> bool:
        if thread is None or not self.config.thread_participation:
            return False
        at = self._threads.get((chat, thread))
        return at is not None and self._clock() - at < PARTICIPATION

    def _participated(self, chat: str, thread: str | None) -> None:
        if thread is not None and self.config.thread_participation:
            _bounded_put(self._threads, (chat, thread), self._clock())

    def _thread_for_command(self, command: dict[str, Any]) -> str | None:
        """Slash commands come without a thread: a /stop goes to the caller's live run in this
        chat (the latest one), else to any live run there, else to the chat's own session."""
        chat, user = str(command.get("channel_id") or ""), str(command.get("user_id") or "")
        live = [(thread, ts) for (c, thread), ts in (self._status.live if self._status else {}).items() if c == chat]
        mine = [thread for thread, ts in live if self._senders.get((chat, ts), ("",))[0] == user]
        found = mine or [thread for thread, _ in live]
        return found[-1] if found else None

    async def _lookup(self, users: list[str]) -> dict[str, str]:
        """Display names of ``users`` (cached); the lookups run together and whatever has not
        answered within ``NAME_LOOKUP`` seconds stays an id, so the ack keeps Slack's 3 s."""
        names = {u: self._names[u] for u in users if u in self._names}
        missing = list(dict.fromkeys(u for u in users if u not in names))[:MAX_LOOKUPS]
        if not missing:
            return names
        tasks = {asyncio.ensure_future(self._name_of(u)): u for u in missing}
        done, pending = await asyncio.wait(tasks, timeout=NAME_LOOKUP)
        for task in pending:
            task.cancel()
        for task in done:
            name = task.result()
            if name is not None:
                names[tasks[task]] = name
                _bounded_put(self._names, tasks[task], name)
        return names

    async def _name_of(self, user: str) -> str | None:
        """The name to show; "" (kept: no name) when Slack refuses, None (asked again) when unreachable."""
        try:
            info = await self.client.users_info(user=user)
        except SlackApiError as exc:
            log.debug("slack: users.info %s refused: %s", user, error_code(exc))
            return "" if exc.response.status_code != 429 else None
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            log.debug("slack: users.info %s failed: %s", user, exc)
            return None
        person = info.get("user") or {}
        profile = person.get("profile") or {}
        return str(profile.get("display_name") or profile.get("real_name") or person.get("name") or "")

    # -- outbound ----------------------------------------------------------------------

    async def send(self, to: Target, text: str) -> str:
        params: dict[str, Any] = {"channel": to.chat_id, "text": text}
        if to.thread_id:
            params["thread_ts"] = to.thread_id
        key = StatusBoard.key(to)
        button = self.config.streaming != "off" and self._status is not None and self._status.is_live(to) \
            and key not in self._buttons
        if button:
            params["blocks"] = stop_blocks(text, to.thread_id)
        try:
            sent = await self.client.chat_postMessage(**params)
        except Exception as exc:  # noqa: BLE001 - mapped, or re-raised when not a Slack/transport failure
            raise self._send_failed(exc, "chat.postMessage") from exc
        ts = str(sent["ts"])
        if button:
            self._buttons[key] = (ts, text)
        self._participated(to.chat_id, to.thread_id)
        return ts

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        # blocks always: Slack keeps a message's blocks when an update leaves them out, and a
        # Stop button left on a draft by a process before a restart must go too
        params: dict[str, Any] = {"channel": to.chat_id, "ts": message_id, "text": text, "blocks": []}
        key = StatusBoard.key(to)
        if self._buttons.get(key, ("",))[0] == message_id:
            self._buttons[key] = (message_id, text)
            params["blocks"] = stop_blocks(text, to.thread_id)
        try:
            await self.client.chat_update(**params)
        except Exception as exc:  # noqa: BLE001
            raise self._send_failed(exc, "chat.update") from exc

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        # text: the notification's and the fallback's, rendered mrkdwn like every send (its <, > and & escaped)
        params: dict[str, Any] = {"channel": to.chat_id, "text": text, "blocks": question_blocks(text, choices)}
        if to.thread_id:
            params["thread_ts"] = to.thread_id
        try:
            sent = await self.client.chat_postMessage(**params)
        except Exception as exc:  # noqa: BLE001 - mapped, or re-raised when not a Slack/transport failure
            raise self._send_failed(exc, "chat.postMessage") from exc
        self._participated(to.chat_id, to.thread_id)
        return str(sent["ts"])

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        """An ephemeral message to the presser, in the question's thread; a press needs no other
        answer on Slack (its ack was the answer). Refusals are logged, never raised."""
        if not text:
            return
        params: dict[str, Any] = {"channel": press.chat_id, "user": press.sender.id, "text": text}
        if press.thread_id:
            params["thread_ts"] = press.thread_id
        try:
            await self.client.chat_postEphemeral(**params)
        except (SlackApiError, aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            log.info("slack: the answer to a press in %s did not reach %s: %s", press.chat_id, press.sender.id,
                     error_code(exc) if isinstance(exc, SlackApiError) else exc)

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        try:
            await self.client.chat_update(channel=to.chat_id, ts=question_id, text=text, blocks=sections(text))
        except Exception as exc:  # noqa: BLE001
            raise self._send_failed(exc, "chat.update") from exc

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        params: dict[str, Any] = {"channel": to.chat_id, "file": data, "filename": name, "title": name}
        if caption:
            params["initial_comment"] = caption
        if to.thread_id:
            params["thread_ts"] = to.thread_id
        try:
            result = await self.client.files_upload_v2(**params)
        except Exception as exc:  # noqa: BLE001
            raise self._send_failed(exc, "files.upload") from exc
        self._participated(to.chat_id, to.thread_id)
        files = result.get("files") or [result.get("file") or {}]
        return f"file:{files[0].get('id', '')}"

    async def status(self, to: Target, status: Status) -> None:
        assert self._status is not None
        await self._status.show(to, status)
        if status is not Status.WORKING:
            await self._drop_button(to)

    async def _drop_button(self, to: Target) -> None:
        found = self._buttons.pop(StatusBoard.key(to), None)
        if found is None:
            return
        ts, text = found
        try:
            await self.client.chat_update(channel=to.chat_id, ts=ts, text=text, blocks=[])
        except (SlackApiError, aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            log.info("slack: removing the Stop button in %s failed: %s", to.chat_id, exc)

    async def stream(self, to: Target) -> LiveDraft | None:
        """Slack's own streaming message in the thread of ``to``. Slack streams only in
        threads: for an answer that goes to the chat itself (a top-level DM, or a channel reply
        with ``reply_in_thread: false``) there is none (None), and the core's progress edits a
        draft message at most every ``shape.edit_every`` instead (with the Stop button, as
        ``send`` adds it), not a stream under the user's message that would split the answer
        between the thread and the chat."""
        if not to.thread_id:
            return None
        sender = self._senders.get((to.chat_id, to.reply_to or ""))
        recipient = sender if to.chat_type is ChatType.GROUP and sender else None
        return SlackStream(self.client, channel=to.chat_id, thread_ts=to.thread_id, recipient=recipient,
                           every=self.shape.edit_every, rollover=self._rollover, clock=self._clock,
                           on_post=lambda: self._participated(to.chat_id, to.thread_id))

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        url = attachment.platform_file_id or ""
        if attachment.size is not None and attachment.size > limit:
            raise SendFailed(f"{attachment.name}: {attachment.size} bytes, over the {limit} byte limit", permanent=True)
        if not self._may_fetch(url):
            raise SendFailed(f"{attachment.name}: not a Slack file URL", permanent=True)
        assert self._session is not None and self.config.bot_token is not None
        headers = {"Authorization": f"Bearer {self.config.bot_token.get_secret_value()}"}
        try:
            async with self._session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=120)) as resp:
                if resp.status == 429:
                    raise SendFailed("file download: rate limited",
                                     retry_after=float(resp.headers.get("Retry-After", "1")))
                if resp.status != 200:
                    raise SendFailed(f"file download: HTTP {resp.status}", permanent=400 <= resp.status < 500)
                if resp.content_type == "text/html":  # Slack's sign-in page: the token lacks files:read
                    raise SendFailed("file download: Slack answered with a sign-in page (add the files:read scope)",
                                     permanent=True)
                data = bytearray()
                async for piece in resp.content.iter_chunked(64 * 1024):
                    data += piece
                    if len(data) > limit:
                        raise SendFailed(f"{attachment.name}: over the {limit} byte limit", permanent=True)
                return bytes(data)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise SendFailed(f"file download: {type(exc).__name__}: {exc}") from exc

    def _may_fetch(self, url: str) -> bool:
        """The bot token goes only to Slack's file host or to the configured API host."""
        parts, api = urlsplit(url), urlsplit(self.config.base_url)
        if parts.scheme not in ("https", "http"):
            return False
        return (parts.scheme == "https" and parts.hostname == "files.slack.com") or parts.netloc == api.netloc
