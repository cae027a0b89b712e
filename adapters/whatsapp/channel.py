"""The WhatsApp channel on the Business Cloud API: webhooks in, WhatsApp markup out.

A thin client (``graph``) rather than a library: the ingress must be ours (the signature on
the raw body, bounded, and the 200 only once every message of a post is stored), errors must
map onto delivery's retry-or-give-up, and the 24-hour window is decided per send.

Inbound (``webhook``, ``inbound``): every signed post's messages are handed to the core's
inbox in order and the post is answered 200 only once they are stored (else 500: Meta sends
it again). A redelivery repeats the message ids, which the core's store dedupes, on any
instance behind a balancer: the channel keeps nothing a redelivery needs. Files travel as
media ids; the core fetches them (``fetch``) only for messages that will run.

Outbound: ``send`` makes one attempt with a rendered chunk (quoting the person's message
when another one came after it, so that the answer is clear about what it answers);
WhatsApp cannot edit (``edit`` is a permanent failure: delivery sends the chunk anew, and
streaming is off). ``status`` marks the person's message read with the typing indicator while a
run works (it lasts 25 s: refreshed every 20), reacts 👀 on it once, and takes the reaction
away when the answer came (❌ when the run failed or was stopped). Files are uploaded, then sent
as an image, an audio, a video or a document; a voice answer is a voice note.

The window (``window``): outside the 24 hours after the person last wrote, a message goes as
the template configured for its target's purpose (a reminder's, else a task's), or fails for
good (delivery gives it up and logs why). When the person last wrote is what this process
heard, else what the store holds (``RecallsInbound``: after a restart, or a message another
instance took), for a send as for ``reach`` (``/tasks``, the dashboard). A ``failed`` status goes
back into delivery's ledger (``ReportsUndelivered``): a failure WhatsApp says is temporary, or a
``131047`` (which closes the chat's window: the template carries it then), is owed again, the
rest given up. A failed message the ledger did not send (a question) is sent once more from
here when the failure is temporary.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from adapters.whatsapp import webhook
from adapters.whatsapp.config import WhatsAppConfig
from adapters.whatsapp.dialect import SHAPE, WHATSAPP
from adapters.whatsapp.graph import OUTSIDE_WINDOW, RATE_LIMITED, RETRYABLE, Graph, Refused
from adapters.whatsapp.inbound import Failure, parse
from adapters.whatsapp.questions import question_payload
from adapters.whatsapp.window import Windows, kind_of, template_payload
from bot.channels import (
    Choice,
    Dialect,
    Inbox,
    LastHeard,
    Lifecycle,
    Reports,
    SendFailed,
    Status,
    Streaming,
    Target,
    Undelivered,
)
from bot.errors import ChannelError
from bot.messages import Attachment, InboundMessage

log = logging.getLogger(__name__)

UPLOAD_LIMIT = 100 * 1024 * 1024  # documents; images 5 MB, audio and video 16 MB
CAPTION = 1024
WORKING, FAILED = "👀", "❌"
RESEND_AFTER = 2.0  # seconds before a message WhatsApp failed for a temporary reason is sent again
_REMEMBERED = 4096
_MEDIA = {"image": ({"image/jpeg", "image/png"}, 5), "video": ({"video/mp4", "video/3gpp"}, 16),
          "audio": ({"audio/ogg", "audio/mpeg", "audio/aac", "audio/amr", "audio/mp4"}, 16)}
_OFFICIAL_MEDIA_HOSTS = (".fbsbx.com", ".whatsapp.net", ".fbcdn.net")


def _put(d: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    d[key] = value
    d.move_to_end(key)
    while len(d) > _REMEMBERED:
        d.popitem(last=False)


def media_type(name: str, size: int) -> tuple[str, str]:
    """(``image`` | ``video`` | ``audio`` | ``document``, the MIME type) a file is sent as."""
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if name.endswith((".ogg", ".opus", ".oga")):
        mime = "audio/ogg"
    for kind, (types, mb) in _MEDIA.items():
        if mime in types and size <= mb * 1024 * 1024:
            return kind, mime
    return "document", mime


class WhatsAppChannel:
    name = "whatsapp"
    dialect: Dialect = WHATSAPP
    shape = replace(SHAPE, max_chunks=8, status_every=20.0, max_upload=UPLOAD_LIMIT)

    def __init__(self, config: WhatsAppConfig, *, clock: Callable[[], float] = time.time,
                 resend_after: float = RESEND_AFTER) -> None:
        for key in ("access_token", "app_secret", "verify_token"):
            if getattr(config, key) is None:
                raise ChannelError(f"channels.whatsapp.{key}: missing (set WHATSAPP_{key.upper()})")
        if not config.phone_number_id:
            raise ChannelError("channels.whatsapp.phone_number_id: missing (WhatsApp Manager > API Setup)")
        assert config.access_token is not None
        self.config = config
        self.streaming: Streaming = "off"
        self.graph = Graph(config.base_url, config.api_version, config.phone_number_id,
                           config.access_token.get_secret_value())
        self.windows = Windows(clock=clock)
        self._resend_after = resend_after
        self._inbox: Inbox | None = None
        self._last_heard: LastHeard | None = None
        self._reports: Reports | None = None
        self._life = Lifecycle()
        self._runner: web.AppRunner | None = None
        self._latest: OrderedDict[str, str] = OrderedDict()  # chat -> the person's latest message id
        self._reacted: OrderedDict[tuple[str, str], str] = OrderedDict()  # (chat, message) -> our reaction
        self._sent: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()  # wamid -> (chat, payload)
        self._closed: OrderedDict[str, str] = OrderedDict()  # question id -> its outcome, sent
        self._display = ""
        self.port: int | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._life.open()
        await self.graph.open()
        try:
            await self._check_number()
            await self._serve()
        except BaseException:
            await self.stop()
            raise
        log.info("whatsapp: number %s ready, webhook on %s:%s%s", self._display or self.config.phone_number_id,
                 self.config.webhook.host, self.port, self.config.webhook.path)

    async def _check_number(self) -> None:
        try:
            number = await self.graph.phone_number()
        except Refused as exc:
            raise ChannelError(f"channels.whatsapp.access_token: Meta refused the token ({exc}; check "
                               "WHATSAPP_ACCESS_TOKEN)") from None
        except SendFailed as exc:
            if exc.permanent:
                raise ChannelError(f"channels.whatsapp.phone_number_id: Meta does not know "
                                   f"{self.config.phone_number_id} for this token ({exc})") from None
            raise ChannelError(f"channels.whatsapp.base_url: cannot reach {self.config.base_url} ({exc})") from None
        self._display = str(number.get("verified_name") or number.get("display_phone_number") or "")

    async def _serve(self) -> None:
        c = self.config
        assert c.app_secret is not None and c.verify_token is not None
        self._runner = webhook.runner(self._take, app_secret=c.app_secret.get_secret_value(),
                                      verify_token=c.verify_token.get_secret_value(), path=c.webhook.path)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, c.webhook.host, c.webhook.port).start()
        except OSError as exc:
            raise ChannelError(f"channels.whatsapp.webhook.bind: cannot listen on {c.webhook.bind} "
                               f"({exc.strerror or exc})") from None
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        await self._life.stop_tasks()
        await self.graph.close()
        self._life.close()

    async def wait_closed(self) -> None:
        await self._life.wait()

    def trouble(self) -> str | None:
        """Readiness (``Connects``): None while the Callback URL's endpoint listens (Meta posts to it)."""
        return None if self._runner is not None and self.port is not None else "the webhook endpoint is not listening"

    def names(self) -> tuple[str, ...]:
        """The business's verified name, for a voice note that calls the bot by name (``Named``)."""
        return (self._display,) if self._display else ()

    # -- inbound -----------------------------------------------------------------------

    async def _take(self, body: dict[str, Any]) -> None:
        """A signed post: its messages stored in order (returns once they are), its failures read."""
        assert self._inbox is not None
        parsed = parse(body, self.config.phone_number_id)
        for msg in parsed.messages:
            self.windows.heard(msg.chat_id, msg.timestamp)  # the person wrote, stored or not yet
            _put(self._latest, msg.chat_id, msg.message_id)
            await self._inbox(msg)
        for failed in parsed.failures:
            await self._failed(failed)  # in the ledger before the 200 (else Meta posts it again)

    def report_undelivered(self, reports: Reports) -> None:
        """``ReportsUndelivered``: delivery's ledger, told of each ``failed`` status."""
        self._reports = reports

    async def _failed(self, failed: Failure) -> None:
        why = f"{failed.code} {failed.title}" + (f": {failed.details}" if failed.details else "")
        outside, temporary = failed.code == OUTSIDE_WINDOW, failed.code in RETRYABLE or failed.code in RATE_LIMITED
        if outside:  # the template for the message's purpose carries it now
            self.windows.close(failed.recipient)
            why = f"outside the 24-hour window, {why}"
        report = Undelivered(failed.message_id, f"whatsapp {why}", retry=temporary or outside)
        if self._reports is not None and await self._reports(report):
            return  # an answer's chunk: the ledger owes it again or gave it up, and said so
        sent = self._sent.pop(failed.message_id, None)
        if sent is not None and temporary:
            log.warning("whatsapp: message %s to %s failed for now (%s); sending it once more",
                        failed.message_id, failed.recipient, why)
            self._life.spawn(self._resend(*sent), f"whatsapp resend {failed.message_id}")
        else:
            log.warning("whatsapp: message %s to %s was not delivered (%s); given up", failed.message_id,
                        failed.recipient, why)

    async def _resend(self, chat: str, payload: dict[str, Any]) -> None:
        await asyncio.sleep(self._resend_after)
        try:
            await self.graph.send(chat, payload)  # not remembered again: sent at most twice
        except SendFailed as exc:
            log.warning("whatsapp: sending a failed message to %s again failed too (%s); given up", chat, exc)

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        if not attachment.platform_file_id:
            raise SendFailed(f"{attachment.name}: no media id", permanent=True)
        record = await self._call(self.graph.media(attachment.platform_file_id))
        size = record.get("file_size")
        if isinstance(size, int) and size > limit:
            raise SendFailed(f"{attachment.name}: {size} bytes, over the {limit} byte limit", permanent=True)
        url = str(record.get("url") or "")
        if not self._may_fetch(url):
            raise SendFailed(f"{attachment.name}: not a WhatsApp media URL", permanent=True)
        return await self.graph.download(url, limit, attachment.name)

    def _may_fetch(self, url: str) -> bool:
        """The token goes only to Meta's media hosts, or to the configured API host."""
        parts, api = urlsplit(url), urlsplit(self.config.base_url)
        if parts.scheme == "https" and (parts.hostname or "").endswith(_OFFICIAL_MEDIA_HOSTS):
            return True
        return parts.scheme in ("https", "http") and parts.netloc == api.netloc

    # -- outbound ----------------------------------------------------------------------

    async def _call(self, call: Any) -> Any:
        """One Graph call; a refused token also stops the channel (the send stays owed)."""
        try:
            return await call
        except Refused as exc:
            self._life.fail(ChannelError(f"channels.whatsapp.access_token: Meta refused the token ({exc}; "
                                         "check WHATSAPP_ACCESS_TOKEN)"))
            raise SendFailed(str(exc)) from None

    async def _send(self, to: Target, payload: dict[str, Any], what: str = "messages") -> str:
        message_id: str = await self._call(self.graph.send(to.chat_id, payload, what))
        _put(self._sent, message_id, (to.chat_id, payload))
        return message_id

    def _quote(self, to: Target) -> dict[str, Any]:
        """Quote the person's message where another one came after it."""
        if to.reply_to and to.reply_to.startswith("wamid.") and self._latest.get(to.chat_id) != to.reply_to:
            return {"context": {"message_id": to.reply_to}}
        return {}

    def recall_inbound(self, last_heard: LastHeard) -> None:
        """``RecallsInbound``: the store's times, for a person this process has not heard lately."""
        self._last_heard = last_heard

    async def _open(self, chat: str) -> bool:
        """Whether ``chat``'s window is open: open by what this process heard, else as the store
        knows it (messages from before a restart, or heard by another instance)."""
        if not self.windows.open_as_heard(chat) and self._last_heard is not None:
            try:
                at = await self._last_heard(self.config.phone_number_id, chat)
            except Exception as exc:  # the store is away: decide on what this process heard
                log.warning("whatsapp: could not read when %s last wrote (%s)", chat, exc)
                at = None
            if at is not None:
                self.windows.recalled(chat, at)
        return self.windows.is_open(chat)

    async def _outside(self, to: Target, text: str) -> dict[str, Any] | None:
        """None within the window; else the template payload that carries ``text``
        (``SendFailed``, permanent, when none is configured for its kind)."""
        if await self._open(to.chat_id):
            return None
        kind = kind_of(to.purpose)
        template = getattr(self.config.templates, kind)
        if template is None:
            raise SendFailed(f"{to.chat_id} last wrote over 24 hours ago and no template is set for a {kind} "
                             f"(channels.whatsapp.templates.{kind}); not sent", permanent=True)
        return template_payload(template.name, template.language, text)

    async def reach(self, to: Target, kind: str, at: float | None) -> str:
        """``Windowed``: "" when a scheduled ``kind`` due ``at`` (None: recurring) reaches ``to``."""
        if getattr(self.config.templates, kind, None) is not None:
            return ""
        await self._open(to.chat_id)  # when the person last wrote, as the store knows it after a restart
        ends = self.windows.ends(to.chat_id)
        if at is not None and ends is not None and at < ends:
            return ""
        return (f"WhatsApp delivers it only within 24 hours of your last message here, and this bot has no "
                f"approved template for a {kind}: write to me shortly before it is due, or it cannot reach you.")

    async def send(self, to: Target, text: str) -> str:
        payload = await self._outside(to, text) or {"type": "text", "text": {"body": text, "preview_url": False},
                                              **self._quote(to)}
        return await self._send(to, payload)

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        raise SendFailed("WhatsApp cannot edit a message", permanent=True)

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        return await self._file(to, name, data, caption, voice=False)

    async def send_voice(self, to: Target, name: str, data: bytes, caption: str) -> str:
        """Ogg/Opus as a voice note (``SendsVoice``); its caption, if any, as a message before it."""
        return await self._file(to, name, data, caption, voice=True)

    async def _file(self, to: Target, name: str, data: bytes, caption: str, *, voice: bool) -> str:
        if not await self._open(to.chat_id):
            raise SendFailed(f"{to.chat_id} last wrote over 24 hours ago: a file cannot go outside the window",
                             permanent=True)
        kind, mime = ("audio", "audio/ogg") if voice else media_type(name, len(data))
        media_id: str = await self._call(self.graph.upload(name, data, mime))
        media: dict[str, Any] = {"id": media_id}
        if kind == "audio" or len(caption) > CAPTION:  # audio takes no caption
            if caption:
                await self._send(to, {"type": "text", "text": {"body": caption, "preview_url": False}})
        elif caption:
            media["caption"] = caption
        if kind == "document":
            media["filename"] = name
        if voice:
            media["voice"] = True
        return await self._send(to, {"type": kind, kind: media, **self._quote(to)}, f"send {kind}")

    async def status(self, to: Target, status: Status) -> None:
        message = to.reply_to
        if not message or not message.startswith("wamid."):
            return  # a scheduled message: nothing of the person's to show it on
        key = (to.chat_id, message)
        if status is Status.WORKING:
            await self._call(self.graph.message({"status": "read", "message_id": message,
                                                 "typing_indicator": {"type": "text"}}, "typing"))
            if key not in self._reacted:
                _put(self._reacted, key, WORKING)
                await self._react(to.chat_id, message, WORKING)
            return
        shown = self._reacted.pop(key, None)
        wanted = FAILED if status is Status.FAILED else ""
        if shown is not None or wanted:
            await self._react(to.chat_id, message, wanted)

    async def _react(self, chat: str, message: str, emoji: str) -> None:
        """React ``emoji`` on ``message`` ("" takes our reaction away); best effort."""
        try:
            await self._call(self.graph.send(chat, {"type": "reaction",
                                                    "reaction": {"message_id": message, "emoji": emoji}}, "reaction"))
        except SendFailed as exc:
            log.debug("whatsapp: reaction on %s failed: %s", message, exc)

    # -- questions (Asks) ----------------------------------------------------------------

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        payload = question_payload(text, choices)
        if not await self._open(to.chat_id):
            raise SendFailed(f"{to.chat_id} last wrote over 24 hours ago: a question cannot go outside the window",
                             permanent=True)
        return await self._send(to, payload, "question")

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        """In a DM only the presser sees the chat: the answer is a message quoting the press."""
        if not text:
            return
        try:
            await self._send(Target(press.chat_id), {"type": "text", "text": {"body": text, "preview_url": False},
                                                     "context": {"message_id": press.message_id}})
        except SendFailed as exc:
            log.info("whatsapp: the answer to a press in %s was not sent: %s", press.chat_id, exc)

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        """WhatsApp cannot take buttons away: the outcome goes as a reply quoting the question
        (once; a late press on it is the core's to refuse)."""
        if self._closed.get(question_id) == text:
            return
        await self._send(to, {"type": "text", "text": {"body": text, "preview_url": False},
                              "context": {"message_id": question_id}}, "question outcome")
        _put(self._closed, question_id, text)
