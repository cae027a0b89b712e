"""The Telegram channel on python-telegram-bot 22: polling or webhook in, HTML out.

Inbound: updates come from our own long-polling loop (with a watchdog; a 409 conflict or
a refused token stops the channel with one clear line) or from our own webhook endpoint
(Telegram's secret header checked on every request). With several instances, every one
serves the webhook (behind any balancer), while only the holder of the lease
``telegram:poller:<bot id>`` polls: another takes it over when that one dies, from the offset
Telegram still holds (nothing confirmed is lost, nothing unconfirmed skipped), and a 409 while
leases change hands is waited out instead of stopping the channel. An update is confirmed only after
the core stored it: the poller's offset moves past an update once ``inbox`` returned for
it (a failed store holds the offset, and the update comes again); the webhook answers
200 only then (else 500, and Telegram sends it again). Album parts arrive as separate
updates and are stored as one message once the album is complete. Files travel as
metadata; the core fetches them (``fetch``) only for messages that will run.

Outbound: ``send`` / ``edit`` / ``send_file`` / ``send_voice`` / ``send_photo`` make one attempt each with a
rendered HTML chunk (a picture Telegram cannot show as a photo goes as a document, see ``photos``); a
chunk Telegram cannot parse is resent once as plain text, a group that became a supergroup is followed;
any other failure is ``SendFailed`` for delivery to retry (with Telegram's ``retry_after``) or give up
(blocked by the user, chat gone, bad request).

Questions (``Asks``, see ``presses``): ``ask`` sends a message with an inline keyboard, a
press comes in as a ``callback_query`` update, confirmed like a message once stored, and
is answered once (the core's ``answer_press``, else blank after two seconds);
``close_question`` edits the question's text and takes its keyboard away.
"""

from __future__ import annotations

import asyncio
import hmac
import io
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, TypeVar

from aiohttp import web
from telegram import Bot, BotCommand, Message, ReplyParameters, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from adapters.telegram.config import TelegramConfig
from adapters.telegram.dialect import SHAPE, TELEGRAM, html_to_text
from adapters.telegram.inbound import BotIdentity, attachments_of, message_of, press_of, to_inbound
from adapters.telegram.photos import photo_problem, refused_as_photo
from adapters.telegram.presses import ANSWER_WITHIN, NO_KEYBOARD, Answers, keyboard, query_id
from adapters.telegram.transport import AiohttpRequest
from bot.channels import (
    COMMAND_MENU,
    SOLE,
    Backoff,
    Choice,
    Dialect,
    Inbox,
    Leases,
    Lifecycle,
    SendFailed,
    Status,
    Streaming,
    Target,
    while_held,
)
from bot.errors import ChannelError
from bot.messages import Attachment, InboundMessage

log = logging.getLogger(__name__)

T = TypeVar("T")
POLL_TIMEOUT = 30  # seconds Telegram holds a getUpdates open
WATCHDOG_GRACE = 30  # a poll silent for POLL_TIMEOUT + this is abandoned and restarted
ALBUM_WAIT = 0.8  # seconds to gather the parts of an album
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
BACKOFF = Backoff(base=1.0, factor=2.0, cap=30.0)  # polling, and updates the core could not store
CONFLICTS_TOLERATED = 5  # 409s in a row waited out where pollers are elected by lease (a hand-over)
UPDATES = ["message", "callback_query"]  # what the bot asks Telegram for: messages and button presses
UPLOAD_LIMIT = 50 * 1024 * 1024  # the Bot API's limit on a file a bot sends (documents, voice notes)


def secret_matches(sent: str | None, secret: str) -> bool:
    """Telegram's secret header against ours, in constant time. On bytes: ``compare_digest``
    raises on a non-ASCII str, and a header is whatever the sender put in it."""
    return sent is not None and hmac.compare_digest(sent.encode("utf-8", "replace"), secret.encode("utf-8"))


@dataclass
class _Album:
    parts: list[Message]
    first_update: int
    stored: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    update_ids: list[int] = field(default_factory=list)


class TelegramChannel:
    name = "telegram"
    dialect: Dialect = TELEGRAM
    shape = replace(SHAPE, max_upload=UPLOAD_LIMIT)

    def __init__(self, config: TelegramConfig, *, poll_timeout: int = POLL_TIMEOUT,
                 watchdog_grace: float = WATCHDOG_GRACE, answer_within: float = ANSWER_WITHIN) -> None:
        self.config = config
        self.streaming: Streaming = config.streaming
        self._poll_timeout = poll_timeout
        self._watchdog = poll_timeout + watchdog_grace
        root = config.base_url.rstrip("/")
        token = config.token.get_secret_value() if config.token is not None else ""
        self.bot = Bot(token, base_url=f"{root}/bot", base_file_url=f"{root}/file/bot",
                       request=AiohttpRequest(pool_size=64),
                       get_updates_request=AiohttpRequest(pool_size=1, read_timeout=self._watchdog))
        self._inbox: Inbox | None = None
        self._identity: BotIdentity | None = None
        self._albums: dict[str, _Album] = {}
        self._migrated: dict[str, str] = {}  # group id -> the supergroup it became
        self._blocked: set[str] = set()  # chats that refused us, logged once
        self._life = Lifecycle()
        self._answers = Answers(self.bot, self._life, wait=answer_within)
        self._site: web.AppRunner | None = None
        self._leases: Leases = SOLE
        self._elected = False  # pollers are elected by lease (several instances)
        self._trouble: str | None = None  # why the last poll failed (readiness), None once one went through
        self._hooked = False  # webhook mode: Telegram took the webhook and the endpoint listens

    def use_leases(self, leases: Leases) -> None:
        self._leases = leases
        self._elected = leases is not SOLE

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._life.open()
        try:
            await self.bot.initialize()  # getMe
        except InvalidToken:
            raise ChannelError("channels.telegram.token: Telegram refused the token (check TELEGRAM_BOT_TOKEN "
                               "with @BotFather)") from None
        except NetworkError as exc:
            raise ChannelError(f"channels.telegram: cannot reach {self.config.base_url}: {exc.message}") from None
        me = self.bot.bot
        self._identity = BotIdentity(me.id, me.username or "")
        await self._sync_commands()
        if self.config.mode == "webhook":
            await self._start_webhook()
        else:
            await self.bot.delete_webhook()
            self._life.spawn(self._poll_while_held(f"telegram:poller:{me.id}"), "telegram poller")
        log.info("telegram: @%s connected (%s)", self._identity.username, self.config.mode)

    async def stop(self) -> None:
        await self._life.stop_tasks()
        self._hooked = False
        if self._site is not None:
            await self._site.cleanup()
            self._site = None
        await self.bot.shutdown()
        self._life.close()

    async def wait_closed(self) -> None:
        await self._life.wait()

    def trouble(self) -> str | None:
        """Readiness (``Connects``): why Telegram is not answering the poller now, or (webhook mode) why
        updates cannot come (the webhook not set, the endpoint not listening); None when all is well."""
        if self.config.mode == "webhook":
            return None if self._hooked and self._site is not None else "the webhook is not set and listening"
        return self._trouble

    def _fail(self, error: ChannelError) -> None:
        log.error("%s", error)
        self._life.fail(error)

    async def _sync_commands(self) -> None:
        """setMyCommands only when the list differs from what Telegram has."""
        current = await self.bot.get_my_commands()
        if [(c.command, c.description) for c in current] != list(COMMAND_MENU):
            await self.bot.set_my_commands([BotCommand(name, text) for name, text in COMMAND_MENU])
            log.info("telegram: command list updated")

    # -- inbound -----------------------------------------------------------------------

    async def _poll_while_held(self, lease: str) -> None:
        """Poll while this instance holds the poller's lease; wait for it again when it is lost."""
        while await while_held(self._leases, lease, self._poll):
            log.warning("telegram: another instance polls now; this one waits to take over")

    async def _poll(self) -> None:
        """Long polling; the offset passes an update only once the core has stored it."""
        offset: int | None = None
        failures = conflicts = 0
        seen: set[int] = set()  # updates taken while the offset is held back for an album
        while True:
            held = min((a.first_update for a in self._albums.values()), default=None)
            try:
                async with asyncio.timeout(self._watchdog):
                    updates = await self.bot.get_updates(
                        offset=held if held is not None else offset,
                        # after a failure, a short poll first: whether Telegram answers again is known at once
                        timeout=0 if held is not None or failures else self._poll_timeout,
                        allowed_updates=UPDATES)
            except TimeoutError:
                log.warning("telegram: a poll went silent for %.0f s; polling again", self._watchdog)
                continue
            except Conflict:
                conflicts += 1
                if self._elected and conflicts <= CONFLICTS_TOLERATED:  # the poller is changing hands
                    await self._pause("another instance polls too (409 Conflict)", conflicts)
                    continue
                self._fail(ChannelError("channels.telegram: another program is polling with this bot token "
                                        "(409 Conflict); stop it, or use one token per bot"))
                return
            except InvalidToken:
                self._fail(ChannelError("channels.telegram.token: Telegram refused the token"))
                return
            except TelegramError as exc:
                failures += 1
                self._trouble = f"polling failed ({exc.message})"
                await self._pause(self._trouble, failures)
                continue
            conflicts, self._trouble = 0, None
            fresh = [u for u in updates if u.update_id not in seen]
            # stored together (the store keeps their order); the offset passes only what was stored
            outcomes = await asyncio.gather(*(self._take(u) for u in fresh), return_exceptions=True)
            failed = next(((u, o) for u, o in zip(fresh, outcomes, strict=True) if isinstance(o, BaseException)), None)
            stored = fresh if failed is None else fresh[:fresh.index(failed[0])]
            seen.update(u.update_id for u in stored)
            if updates:
                offset = updates[-1].update_id + 1
            if failed is not None:  # the core could not store it: it is not confirmed, it comes again
                failures += 1
                offset = failed[0].update_id
                await self._pause(f"an update could not be stored ({failed[1]})", failures)
                continue
            failures = 0
            floor = min((a.first_update for a in self._albums.values()), default=offset)
            seen = {u for u in seen if floor is None or u >= floor}
            if self._albums:
                await asyncio.sleep(ALBUM_WAIT / 4)  # the album's parts and its timer, then poll again

    async def _pause(self, why: str, failures: int) -> None:
        wait = BACKOFF.delay(failures)
        log.warning("telegram: %s; trying again in %.1f s", why, wait)
        await asyncio.sleep(wait)

    async def _start_webhook(self) -> None:
        s = self.config.webhook
        app = web.Application()
        app.router.add_post("/" + s.path.lstrip("/"), self._webhook_request)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, s.listen, s.port).start()
        self._site = runner
        secret = s.secret_token.get_secret_value() if s.secret_token is not None else None
        self._hooked = await self.bot.set_webhook(s.url or "", secret_token=secret, allowed_updates=UPDATES)

    async def _webhook_request(self, request: web.Request) -> web.Response:
        secret = self.config.webhook.secret_token
        if secret is not None and not secret_matches(request.headers.get(SECRET_HEADER), secret.get_secret_value()):
            return web.Response(status=403)
        try:
            update = Update.de_json(await request.json(), self.bot)
        except ValueError:
            return web.Response(status=400)
        if update is None:
            return web.Response(status=200)
        try:
            await self._take(update, wait_album=True)
        except Exception as exc:  # not stored: Telegram sends it again
            log.warning("telegram: an update could not be stored (%s); Telegram will retry", exc)
            return web.Response(status=500)
        return web.Response(status=200)

    async def _take(self, update: Update, *, wait_album: bool = False) -> None:
        """Hand one update's message or button press to the core (returns once stored), or gather
        an album part."""
        assert self._identity is not None and self._inbox is not None
        if update.callback_query is not None:
            query = update.callback_query
            self._answers.arrived(query.id)  # the spinner stops within two seconds, stored or not
            press = press_of(query, self._identity)
            if press is not None:
                await self._inbox(press)
            return
        message = message_of(update)
        if message is None:
            return
        if message.from_user is not None and message.from_user.id == self._identity.id:
            return
        if not message.media_group_id:
            msg = to_inbound(message, self._identity, attachments_of(message))
            if msg is not None:
                await self._inbox(msg)
            return
        key = f"{message.chat.id}:{message.media_group_id}"
        album = self._albums.get(key)
        if album is None:
            album = self._albums[key] = _Album([], update.update_id)
            self._life.spawn(self._flush_album(key), f"telegram album {key}")
        album.parts.append(message)
        album.update_ids.append(update.update_id)
        if wait_album:
            await asyncio.shield(album.stored)

    async def _flush_album(self, key: str) -> None:
        """Album parts arrive as separate updates: wait a moment, then store them as one message."""
        await asyncio.sleep(ALBUM_WAIT)
        album = self._albums[key]
        assert self._identity is not None and self._inbox is not None
        parts = album.parts
        captioned = next((m for m in parts if m.caption or m.text), parts[0])
        attachments = tuple(a for m in parts for a in attachments_of(m))
        msg = to_inbound(captioned, self._identity, attachments)
        try:
            if msg is not None:  # the album is known by its first message
                await self._inbox(replace(msg, message_id=str(parts[0].message_id)))
        except Exception as exc:
            album.stored.set_exception(exc)
            album.stored.exception()  # retrieved: the poller re-reads the parts
            del self._albums[key]
            log.warning("telegram: album %s could not be stored (%s); it comes again", key, exc)
            return
        album.stored.set_result(None)
        del self._albums[key]

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        if attachment.platform_file_id is None:
            raise SendFailed(f"{attachment.name}: no file id", permanent=True)
        try:
            file = await self.bot.get_file(attachment.platform_file_id)
            if file.file_size is not None and file.file_size > limit:
                raise SendFailed(f"{attachment.name} is {file.file_size} bytes, over {limit}", permanent=True)
            buffer = io.BytesIO()
            await file.download_to_memory(buffer)
        except TelegramError as exc:
            raise SendFailed(f"{attachment.name}: {exc.message}") from None
        data = buffer.getvalue()
        if len(data) > limit:
            raise SendFailed(f"{attachment.name} is {len(data)} bytes, over {limit}", permanent=True)
        return data

    # -- outbound ----------------------------------------------------------------------

    async def send(self, to: Target, text: str) -> str:
        params = self._where(to)
        sent = await self._parsed(to.chat_id, text,
                                  lambda c, body, mode: self.bot.send_message(c, body, parse_mode=mode, **params))
        return str(sent.message_id)

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        try:
            await self._parsed(to.chat_id, text, lambda c, body, mode: self.bot.edit_message_text(
                body, c, int(message_id), parse_mode=mode))
        except SendFailed as exc:
            if "message is not modified" not in str(exc).lower():
                raise

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        params = self._where(to)
        sent = await self._attempt(to.chat_id, lambda c: self.bot.send_document(
            c, data, filename=name, caption=caption or None, parse_mode=ParseMode.HTML, **params))
        return str(sent.message_id)

    async def send_photo(self, to: Target, name: str, data: bytes, caption: str) -> str:
        """A picture as a photo with its caption (``SendsPhoto``); a document when it is too big for
        a photo or its dimensions are not a photo's, or when Telegram refuses it as a photo."""
        problem = photo_problem(data)
        if problem is None:
            params = self._where(to)
            try:
                sent = await self._attempt(to.chat_id, lambda c: self.bot.send_photo(
                    c, data, filename=name, caption=caption or None, parse_mode=ParseMode.HTML, **params))
                return str(sent.message_id)
            except SendFailed as exc:
                if not (exc.permanent and refused_as_photo(str(exc))):
                    raise
                problem = str(exc)
        log.info("telegram: %s goes as a document, not a photo (%s)", name, problem)
        return await self.send_file(to, name, data, caption)

    async def send_voice(self, to: Target, name: str, data: bytes, caption: str) -> str:
        """Ogg/Opus as a voice note: Telegram shows it as a voice bubble (``SendsVoice``)."""
        params = self._where(to)
        sent = await self._attempt(to.chat_id, lambda c: self.bot.send_voice(
            c, data, filename=name, caption=caption or None, parse_mode=ParseMode.HTML, **params))
        return str(sent.message_id)

    def names(self) -> tuple[str, ...]:
        """The bot's username and first name, for a voice note that calls it by name (``Named``)."""
        if self._identity is None:
            return ()
        return tuple(n for n in (self._identity.username, self.bot.bot.first_name) if n)

    async def status(self, to: Target, status: Status) -> None:
        if status is Status.WORKING:  # Telegram has no status to clear: "typing…" ends with the next message
            thread = int(to.thread_id) if to.thread_id else None
            await self._attempt(to.chat_id, lambda c: self.bot.send_chat_action(
                c, ChatAction.TYPING, message_thread_id=thread))

    # -- questions (Asks) ----------------------------------------------------------------

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        markup = keyboard(choices)
        params = self._where(to)
        sent = await self._parsed(to.chat_id, text, lambda c, body, mode: self.bot.send_message(
            c, body, parse_mode=mode, reply_markup=markup, **params))
        return str(sent.message_id)

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        query = query_id(press.message_id)
        if query is not None:
            await self._answers.answer(query, text)

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        try:
            await self._parsed(to.chat_id, text, lambda c, body, mode: self.bot.edit_message_text(
                body, c, int(question_id), parse_mode=mode, reply_markup=NO_KEYBOARD))
        except SendFailed as exc:
            if "message is not modified" not in str(exc).lower():
                raise

    def _where(self, to: Target) -> dict[str, Any]:
        params: dict[str, Any] = {"message_thread_id": int(to.thread_id) if to.thread_id else None}
        if to.reply_to and to.reply_to.isdigit() and to.chat_id.startswith("-"):  # groups: reply to the trigger
            params["reply_parameters"] = ReplyParameters(int(to.reply_to), allow_sending_without_reply=True)
        return params

    async def _parsed(self, chat_id: str, html: str, call: Callable[[str, str, str | None], Awaitable[T]]) -> T:
        """One call with HTML; if Telegram cannot parse it, the same text once as plain text."""
        try:
            return await self._attempt(chat_id, lambda c: call(c, html, ParseMode.HTML))
        except SendFailed as exc:
            if "can't parse entities" not in str(exc).lower():
                raise
            log.warning("telegram could not parse our HTML (%s); sending plain text", exc)
            return await self._attempt(chat_id, lambda c: call(c, html_to_text(html), None))

    async def _attempt(self, chat_id: str, fn: Callable[[str], Awaitable[T]]) -> T:
        """One Bot API call for a chat, Telegram's failures as ``SendFailed``; a migrated group is followed."""
        for _ in range(2):
            target = self._migrated.get(chat_id, chat_id)
            try:
                return await fn(target)
            except ChatMigrated as exc:
                log.info("chat %s became supergroup %s", chat_id, exc.new_chat_id)
                self._migrated[chat_id] = str(exc.new_chat_id)
            except RetryAfter as exc:
                raise SendFailed(f"flood control: {exc.message}", retry_after=_seconds(exc.retry_after)) from None
            except Forbidden as exc:
                if chat_id not in self._blocked:
                    self._blocked.add(chat_id)
                    log.warning("telegram refuses to deliver to chat %s: %s", chat_id, exc.message)
                raise SendFailed(f"refused: {exc.message}", permanent=True) from None
            except BadRequest as exc:
                raise SendFailed(exc.message, permanent=True) from None
            except TelegramError as exc:  # network errors, timeouts, 5xx
                raise SendFailed(exc.message) from None
        raise SendFailed(f"chat {chat_id} migrated twice", permanent=True)


def _seconds(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
