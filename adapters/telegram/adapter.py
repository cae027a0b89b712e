"""The Telegram channel on python-telegram-bot 22: polling or webhook in, HTML out.

Inbound: updates come from our own long-polling loop (with a watchdog; a 409 conflict or
a refused token stops the channel with one clear line) or from PTB's webhook server
(its secret token checked on every request). Albums arrive as one message; photos are
downloaded for the model, documents and voice notes are handed to the core to save in
the workspace; files over ``max_download_mb`` are refused with a reply.

Outbound: Markdown is rendered to Telegram HTML and split into chunks of at most 4096
UTF-16 units; more than 8 chunks go out as a Markdown file with a short summary. Groups
get a reply to the triggering message, topics stay in their topic. While a run lives
the chat shows "typing…" (refreshed every 4 s); with ``streaming: edit`` one draft
message is edited at most once a second and becomes the first chunk of the answer.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from telegram import Bot, BotCommand, Message, Update
from telegram.constants import ChatAction
from telegram.error import Conflict, InvalidToken, NetworkError, TelegramError

from adapters.base import Handler
from adapters.telegram.delivery import Courier
from adapters.telegram.dialect import LIMITS, TELEGRAM
from adapters.telegram.inbound import BotIdentity, message_of, to_inbound
from adapters.telegram.transport import AiohttpRequest
from bot.agent.events import EventKind, RunEvent
from bot.channels.markdown import render
from bot.channels.split import render_chunks, too_many
from bot.errors import ChannelError
from bot.messages import Attachment, AttachmentKind, InboundMessage, OutboundReply

log = logging.getLogger(__name__)

POLL_TIMEOUT = 30  # seconds Telegram holds a getUpdates open
WATCHDOG_GRACE = 30  # a poll silent for POLL_TIMEOUT + this is abandoned and restarted
TYPING_EVERY = 4.0
EDIT_EVERY = 1.0  # at most one draft edit per second per message
ALBUM_WAIT = 0.8  # seconds to gather the parts of an album
COMMANDS = (("stop", "Stop the current answer"), ("new", "Start a fresh conversation"),
            ("status", "Model, context and cost of this conversation"), ("whoami", "Your Telegram id"),
            ("help", "What I can do"))


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    token: str
    base_url: str = "https://api.telegram.org"
    mode: str = "polling"  # polling | webhook
    webhook_listen: str = "0.0.0.0"
    webhook_port: int = 8443
    webhook_path: str = "/telegram"
    webhook_url: str | None = None
    webhook_secret: str | None = None
    streaming: bool = False
    max_download_bytes: int = 20 * 1024 * 1024
    poll_timeout: int = POLL_TIMEOUT
    watchdog_grace: float = WATCHDOG_GRACE


@dataclass
class _Progress:
    """What the chat shows for one run: typing, and the streaming draft."""

    chat_id: str
    thread_id: int | None
    reply_to: int | None
    typing: asyncio.Task[None] | None = None
    text: str = ""
    draft: int | None = None  # message id of the draft
    shown: str = ""  # what the draft shows now
    last_edit: float = 0.0
    editing: asyncio.Task[None] | None = None
    busy: bool = False  # a draft request is in flight


class TelegramAdapter:
    platform = "telegram"

    def __init__(self, settings: TelegramSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        root = settings.base_url.rstrip("/")
        updates_read = settings.poll_timeout + settings.watchdog_grace
        self.bot = Bot(settings.token, base_url=f"{root}/bot", base_file_url=f"{root}/file/bot",
                       request=AiohttpRequest(pool_size=64),
                       get_updates_request=AiohttpRequest(pool_size=1, read_timeout=updates_read))
        self.courier = Courier(self.bot)
        self._clock = clock
        self._handle: Handler | None = None
        self._identity: BotIdentity | None = None
        self._runs: dict[str, _Progress] = {}
        self._albums: dict[str, list[Message]] = {}
        self._delivered: dict[tuple[str, int], tuple[int | None, int]] = {}  # (run, part) -> (first id, chunks sent)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed: asyncio.Future[None] | None = None
        self._updater = None  # PTB's webhook server, in webhook mode

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, handle: Handler) -> None:
        self._handle = handle
        self._closed = asyncio.get_running_loop().create_future()
        try:
            await self.bot.initialize()  # getMe
        except InvalidToken:
            raise ChannelError("channels.telegram.token: Telegram refused the token (check TELEGRAM_BOT_TOKEN "
                               "with @BotFather)") from None
        except NetworkError as exc:
            raise ChannelError(f"channels.telegram: cannot reach {self.settings.base_url}: {exc.message}") from None
        me = self.bot.bot
        self._identity = BotIdentity(me.id, me.username or "")
        await self._sync_commands()
        if self.settings.mode == "webhook":
            await self._start_webhook()
        else:
            await self.bot.delete_webhook()
            self._spawn(self._poll(), "telegram poller")
        log.info("telegram: @%s connected (%s)", self._identity.username, self.settings.mode)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        if self._updater is not None:
            await self._updater.stop()
            await self._updater.shutdown()
            self._updater = None
        for progress in self._runs.values():
            _cancel(progress.typing, progress.editing)
        await self.bot.shutdown()

    async def wait_closed(self) -> None:
        assert self._closed is not None
        await asyncio.shield(self._closed)

    def _fail(self, error: ChannelError) -> None:
        log.error("%s", error)
        if self._closed is not None and not self._closed.done():
            self._closed.set_exception(error)

    async def _sync_commands(self) -> None:
        """setMyCommands only when the list differs from what Telegram has."""
        wanted = [BotCommand(name, text) for name, text in COMMANDS]
        current = await self.bot.get_my_commands()
        if [(c.command, c.description) for c in current] != list(COMMANDS):
            await self.bot.set_my_commands(wanted)
            log.info("telegram: command list updated")

    # -- inbound -----------------------------------------------------------------------

    async def _poll(self) -> None:
        offset: int | None = None
        backoff = 1.0
        timeout = self.settings.poll_timeout
        watchdog = timeout + self.settings.watchdog_grace
        while True:
            try:
                async with asyncio.timeout(watchdog):
                    updates = await self.bot.get_updates(offset=offset, timeout=timeout,
                                                         allowed_updates=["message"])
            except TimeoutError:
                log.warning("telegram: a poll went silent for %.0f s; polling again", watchdog)
                continue
            except Conflict:
                self._fail(ChannelError("channels.telegram: another program is polling with this bot token "
                                        "(409 Conflict); stop it, or use one token per bot"))
                return
            except InvalidToken:
                self._fail(ChannelError("channels.telegram.token: Telegram refused the token"))
                return
            except TelegramError as exc:
                log.warning("telegram: polling failed (%s); retrying in %.0f s", exc.message, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            backoff = 1.0
            for update in updates:
                offset = update.update_id + 1
                await self._take(update)

    async def _start_webhook(self) -> None:
        from telegram.ext import Updater

        s = self.settings
        self._updater = Updater(self.bot, asyncio.Queue())
        await self._updater.initialize()
        queue = await self._updater.start_webhook(listen=s.webhook_listen, port=s.webhook_port,
                                                  url_path=s.webhook_path.lstrip("/"), webhook_url=s.webhook_url,
                                                  secret_token=s.webhook_secret, allowed_updates=["message"])
        self._spawn(self._drain(queue), "telegram webhook queue")

    async def _drain(self, queue: asyncio.Queue[object]) -> None:
        while True:
            update = await queue.get()
            if isinstance(update, Update):
                await self._take(update)

    async def _take(self, update: Update) -> None:
        message = message_of(update)
        if message is None:
            return
        assert self._identity is not None
        if message.from_user is not None and message.from_user.id == self._identity.id:
            return
        if message.media_group_id:
            self._gather(message)
            return
        self._spawn(self._deliver_inbound([message]), f"telegram inbound {message.message_id}")

    def _gather(self, message: Message) -> None:
        """Album parts arrive as separate messages: wait a moment, then pass them on as one."""
        key = f"{message.chat.id}:{message.media_group_id}"
        parts = self._albums.setdefault(key, [])
        parts.append(message)
        if len(parts) == 1:
            async def flush() -> None:
                await asyncio.sleep(ALBUM_WAIT)
                await self._deliver_inbound(self._albums.pop(key))

            self._spawn(flush(), f"telegram album {key}")

    async def _deliver_inbound(self, messages: list[Message]) -> None:
        assert self._identity is not None and self._handle is not None
        first = messages[0]
        try:
            attachments = tuple([a for m in messages for a in await self._attachments(m)])
        except _TooBig as exc:
            await self.courier.send_html(str(first.chat.id), exc.text, reply_to=first.message_id,
                                         thread_id=first.message_thread_id if first.is_topic_message else None)
            return
        captioned = next((m for m in messages if m.caption or m.text), first)
        msg = to_inbound(captioned, self._identity, attachments)
        if msg is None:
            return
        if len(messages) > 1:  # the album is known by its first message
            msg = _replace_id(msg, str(first.message_id))
        await self._handle(msg)

    async def _attachments(self, message: Message) -> list[Attachment]:
        found: list[tuple[AttachmentKind, str, str | None, int | None, str]] = []
        if message.photo:
            photo = message.photo[-1]  # the largest size
            found.append((AttachmentKind.IMAGE, photo.file_id, "image/jpeg", photo.file_size,
                          f"photo-{message.message_id}.jpg"))
        if message.document:
            d = message.document
            found.append((AttachmentKind.DOCUMENT, d.file_id, d.mime_type, d.file_size,
                          d.file_name or f"document-{message.message_id}"))
        if message.voice:
            v = message.voice
            found.append((AttachmentKind.VOICE, v.file_id, v.mime_type or "audio/ogg", v.file_size,
                          f"voice-{message.message_id}.ogg"))
        limit = self.settings.max_download_bytes
        for _, _, _, size, name in found:
            if size is not None and size > limit:
                raise _TooBig(f"“{name}” is {size / 1048576:.1f} MB; I can take files up to "
                              f"{limit / 1048576:.0f} MB.")
        out = []
        for kind, file_id, mime, _, name in found:
            file = await self.bot.get_file(file_id)
            buffer = io.BytesIO()
            await file.download_to_memory(buffer)
            data = buffer.getvalue()
            out.append(Attachment(kind, name, mime, len(data), data=data, platform_file_id=file_id))
        return out

    # -- outbound ----------------------------------------------------------------------

    async def send(self, reply: OutboundReply) -> str | None:
        progress = self._runs.pop(reply.run_id, None)
        draft = await self._settle_draft(progress) if progress is not None else None
        thread = int(reply.thread_id) if reply.thread_id else None
        # Telegram group ids are negative: there we answer as a reply to the trigger.
        reply_to = int(reply.reply_to) if reply.reply_to and reply.chat_id.startswith("-") else None
        chunks = render_chunks(reply.text, TELEGRAM, LIMITS) or [render(reply.text.strip(), TELEGRAM) or "…"]
        if too_many(chunks, LIMITS):
            return await self._send_file(reply, thread, reply_to)
        # A send retried after a failure mid-way goes on after the chunks already delivered.
        key = (reply.run_id, reply.part)
        first, done = self._delivered.pop(key, (draft, 0))
        for i in range(done, len(chunks)):
            try:
                if i == 0 and draft is not None:  # the draft becomes the first chunk: no second copy
                    assert progress is not None
                    await asyncio.sleep(max(0.0, progress.last_edit + EDIT_EVERY - self._clock()))
                    await self.courier.edit_html(reply.chat_id, draft, chunks[0])
                    continue
                sent = await self.courier.send_html(reply.chat_id, chunks[i], reply_to=reply_to if i == 0 else None,
                                                    thread_id=thread)
            except BaseException:
                self._delivered[key] = (first, i)
                raise
            if i == 0 and sent is not None:
                first = sent.message_id
        return str(first) if first is not None else None

    async def _settle_draft(self, progress: _Progress) -> int | None:
        """Stop typing and streaming for a run about to be answered; its draft's id."""
        _cancel(progress.typing)
        editing = progress.editing
        if editing is not None and not editing.done():
            if progress.busy:
                await asyncio.wait({editing})  # a request is in flight: let it land
            else:
                editing.cancel()  # only waiting for its edit slot
                await asyncio.wait({editing})
        return progress.draft

    async def _send_file(self, reply: OutboundReply, thread: int | None, reply_to: int | None) -> str | None:
        summary = reply.text.strip().split("\n\n", 1)[0][:300]
        note = render(f"{summary}\n\n_The full answer is long, so it is attached as a file._", TELEGRAM)
        sent = await self.courier.send_html(reply.chat_id, note, reply_to=reply_to, thread_id=thread)
        document = reply.text.encode()
        await self.courier.call(reply.chat_id, lambda c: self.bot.send_document(
            c, document, filename="answer.md", message_thread_id=thread))
        return str(sent.message_id) if sent is not None else None

    async def show(self, event: RunEvent, inbound: InboundMessage) -> None:
        kind = event.kind
        if kind is EventKind.STARTED:
            progress = self._runs[event.run_id] = _Progress(
                inbound.chat_id, int(inbound.thread_id) if inbound.thread_id else None,
                int(inbound.message_id) if inbound.chat_type.value == "group" and inbound.message_id.isdigit()
                else None)
            progress.typing = asyncio.create_task(self._type(progress), name=f"typing {event.run_id}")
            return
        progress = self._runs.get(event.run_id)
        if progress is None:
            return
        if kind in (EventKind.FAILED, EventKind.CANCELLED) or (kind is EventKind.COMPLETED and not event.text):
            _cancel(progress.typing, progress.editing)  # silence, an error or /stop: stop typing now
            self._runs.pop(event.run_id, None)
        elif kind is EventKind.CHUNK and self.settings.streaming:
            progress.text += event.text
            if progress.editing is None or progress.editing.done():
                progress.editing = asyncio.create_task(self._edit_draft(progress), name=f"draft {event.run_id}")
        elif kind is EventKind.TOOL_CALL:
            progress.text = ""  # the next step's text replaces this one's in the draft

    async def _type(self, progress: _Progress) -> None:
        while True:
            try:
                await self.courier.call(progress.chat_id, lambda c: self.bot.send_chat_action(
                    c, ChatAction.TYPING, message_thread_id=progress.thread_id))
            except TelegramError as exc:
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(TYPING_EVERY)

    async def _edit_draft(self, progress: _Progress) -> None:
        """Bring the draft up to date, at most one edit per EDIT_EVERY seconds."""
        while progress.text.strip() and progress.text != progress.shown:
            wait = progress.last_edit + EDIT_EVERY - self._clock()
            if progress.draft is not None and wait > 0:
                await asyncio.sleep(wait)
            text = progress.text
            chunks = render_chunks(text, TELEGRAM, LIMITS)
            if not chunks:  # nothing visible yet (e.g. an empty code block so far)
                return
            html = chunks[0]
            progress.busy = True
            try:
                if progress.draft is None:
                    sent = await self.courier.send_html(progress.chat_id, html, reply_to=progress.reply_to,
                                                        thread_id=progress.thread_id)
                    progress.draft = sent.message_id if sent is not None else None
                else:
                    await self.courier.edit_html(progress.chat_id, progress.draft, html)
            except TelegramError as exc:
                log.info("telegram: draft update failed: %s", exc)
                return
            finally:
                progress.busy = False
            progress.shown, progress.last_edit = text, self._clock()

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _TooBig(Exception):
    def __init__(self, text: str) -> None:
        self.text = text


def _cancel(*tasks: asyncio.Task[None] | None) -> None:
    for task in tasks:
        if task is not None and not task.done():
            task.cancel()


def _replace_id(msg: InboundMessage, message_id: str) -> InboundMessage:
    return replace(msg, message_id=message_id)
