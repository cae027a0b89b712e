"""The channel port: what the core asks of every platform.

A channel turns platform events into ``InboundMessage``s and hands each to the core's
``Inbox``; the call returns once the message is stored, and only then may the channel
confirm the event to the platform (Telegram's offset, Slack's ack). Everything a channel
sends is already rendered in its ``dialect`` and split to its message ``shape`` by the core's
outbound pipeline (``bot.outbound``); delivery (``bot.delivery``) owns retries, so a
channel's ``send`` makes one attempt and raises ``SendFailed`` when it did not land.

What only some channels can do is a capability of its own (``bot.channels.capabilities``),
checked with ``isinstance`` where the channel is wired, never looked up by name where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.channels.dialect import Dialect
from bot.config.types import Streaming
from bot.errors import ChatgateError
from bot.messages import Attachment, InboundMessage, Target


class Measure(StrEnum):
    """How a platform counts a message's length."""

    CHARS = "chars"  # code points of the text as sent (Discord, Slack)
    UTF16 = "utf16"  # UTF-16 code units of the visible text (Telegram)


@dataclass(frozen=True, slots=True)
class MessageShape:
    """What a platform's messages may be, and how often they may change: how long (``chunk``,
    counted by ``measure``), how many lines and how many to an answer, and the pace of a
    draft's edits and of the "typing…" status. (Not to be confused with the per-person
    limits of ``bot.limits``.)"""

    chunk: int  # at most this many measured units per message
    measure: Measure = Measure.CHARS
    max_lines: int | None = None  # a softer cap on lines per message (Discord: ~17)
    max_chunks: int = 8  # above this many messages the answer goes as a .md file
    edit_every: float = 1.0  # seconds between edits of a streaming draft
    status_every: float = 4.0  # seconds between refreshes of "typing…" (it expires on the platform)
    max_upload: int = 20 * 1024 * 1024  # bytes of the largest file the bot may send there


class Status(StrEnum):
    """What a chat shows about a run, set by the core's progress and delivery."""

    WORKING = "working"  # a run lives (refreshed every ``shape.status_every``)
    DONE = "done"  # the answer was delivered
    FAILED = "failed"  # the run failed or was stopped
    SILENT = "silent"  # NO_REPLY: leave no trace


class SendFailed(ChatgateError):
    """One send did not land. ``permanent`` sends are never retried (the chat is gone, the
    bot was blocked, the request is malformed); others are retried by delivery, after
    ``retry_after`` seconds when the platform said so."""

    def __init__(self, detail: str, *, permanent: bool = False, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.permanent = permanent
        self.retry_after = retry_after


class Inbox(Protocol):
    async def __call__(self, msg: InboundMessage) -> None:
        """Store ``msg`` and decide what to do with it; returns once it is stored (raises if it
        could not be: the channel must then not confirm the event)."""


class Channel(Protocol):
    """One platform. ``streaming`` says how the core's progress shows a run's text while it
    streams: ``off``, ``edit`` (one draft message, edited) or ``native`` (the channel's own
    streaming message: it must be a ``Streams``; without it progress edits a draft)."""

    name: str
    shape: MessageShape
    dialect: Dialect
    streaming: Streaming

    async def start(self, inbox: Inbox) -> None:
        """Connect and begin receiving; returns once connected (raises ``ChannelError``)."""

    async def stop(self) -> None:
        """Stop receiving and release connections; idempotent."""

    async def wait_closed(self) -> None:
        """Return when the channel ends (on its own, or stopped); raise ``ChannelError`` when it cannot go on."""

    async def send(self, to: Target, text: str) -> str:
        """Send one rendered chunk; the platform's message id."""

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        """Replace a message's text with one rendered chunk."""

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        """Send a file with a rendered caption; the platform's message id."""

    async def status(self, to: Target, status: Status) -> None:
        """Show run state: typing or a status line while WORKING, a reaction when it ends."""

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        """Download an attachment of at most ``limit`` bytes (``SendFailed`` when bigger)."""
