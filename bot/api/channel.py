"""A channel of the port whose chats are HTTP exchanges: the API's (and, extended, the web chat's).

The turn runner answers a conversation of platform ``api`` as it answers any chat: progress
streams the text into the channel's native stream (``stream``: each ``append`` is a delta),
delivery sends the stored answer (``send``), ``send_file`` sends a file, and the run's end is
on the event bus. Each chat (a session's thread) has watchers: the requests waiting on it;
what the channel is given for a chat goes to each of its watchers as ``Item``s, in order,
and to nobody when no one watches (delivery counts it delivered: the turn is stored, the
client that went away reads it in the session's history, or never).

``start`` settles what a previous process left unanswered here: a request's client is gone
with that process, so nothing is run again for it (the intake would otherwise take it up
with the rights of a local user).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.agent.events import EventKind, RunEvent
from bot.channels import PLAIN, Dialect, Inbox, MessageShape, SendFailed, Status
from bot.config.types import Streaming
from bot.messages import Attachment, Target

log = logging.getLogger(__name__)

SHAPE = MessageShape(chunk=1_000_000, max_chunks=1_000, edit_every=0.0, status_every=3600.0,
                     max_upload=20 * 1024 * 1024)
ENDS = {EventKind.COMPLETED: "completed", EventKind.FAILED: "failed", EventKind.CANCELLED: "cancelled"}


@dataclass(frozen=True, slots=True)
class Item:
    """One thing for a chat: ``delta`` (streamed text), ``say`` (a message), ``file``, ``ask`` (a
    question with buttons), ``closed`` (a question decided), ``end`` (the run ended: ``text`` is
    its final answer or failure, ``usage`` its tokens in and out)."""

    kind: str
    text: str = ""
    name: str = ""
    data: bytes = b""
    ref: str = ""  # the message's id (ask, closed, say)
    choices: tuple[tuple[str, str], ...] = ()  # (id, label)
    usage: tuple[int, int] = (0, 0)
    outcome: str = ""  # end: completed, failed, cancelled


class Watch:
    """One request's view of a chat."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[Item] = asyncio.Queue()


class _Live:
    def __init__(self, channel: ExchangeChannel, chat: str) -> None:
        self._channel, self._chat = channel, chat

    async def append(self, text: str) -> None:
        self._channel.tell(self._chat, Item("delta", text))

    async def close(self) -> str | None:
        return None  # the stored answer is sent as a message of its own


class ExchangeChannel:
    """The port's ``Channel`` (and ``Streams``) for chats that are HTTP requests."""

    streaming: Streaming = "native"

    def __init__(self, name: str, *, dialect: Dialect = PLAIN, shape: MessageShape = SHAPE,
                 settle: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.name, self.dialect, self.shape = name, dialect, shape
        self._settle = settle
        self._watchers: dict[str, list[Watch]] = {}
        self._ids = itertools.count(1)
        self._stopped = asyncio.Event()
        self.inbox: Inbox | None = None

    # -- watching ------------------------------------------------------------------------

    def watch(self, chat: str) -> Watch:
        watch = Watch()
        self._watchers.setdefault(chat, []).append(watch)
        return watch

    def unwatch(self, chat: str, watch: Watch) -> None:
        watchers = self._watchers.get(chat, [])
        if watch in watchers:
            watchers.remove(watch)
        if not watchers:
            self._watchers.pop(chat, None)

    def tell(self, chat: str, item: Item) -> None:
        for watch in self._watchers.get(chat, ()):
            watch.items.put_nowait(item)

    def on_event(self, event: RunEvent) -> None:
        """The event bus's inline subscriber: a run of one of these chats ended."""
        conversation = event.conversation
        if conversation.platform != self.name or conversation.key.subs or event.kind not in ENDS:
            return
        usage = (event.usage.input_tokens, event.usage.output_tokens) if event.usage is not None else (0, 0)
        self.tell(conversation.chat_id, Item("end", event.text, usage=usage, outcome=ENDS[event.kind]))

    def next_id(self) -> str:
        return f"{self.name}-{next(self._ids)}"

    # -- the port ------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self.inbox = inbox
        if self._settle is not None:
            await self._settle(self.name)

    async def stop(self) -> None:
        self._stopped.set()

    async def wait_closed(self) -> None:
        await self._stopped.wait()

    async def send(self, to: Target, text: str) -> str:
        ref = self.next_id()
        self.tell(to.chat_id, Item("say", text, ref=ref))
        return ref

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        self.tell(to.chat_id, Item("edit", text, ref=message_id))

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        ref = self.next_id()
        self.tell(to.chat_id, Item("file", caption, name=name, data=data, ref=ref))
        return ref

    async def status(self, to: Target, status: Status) -> None:
        return None

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        if attachment.data is None:
            raise SendFailed("this file is not here any more", permanent=True)
        if len(attachment.data) > limit:
            raise SendFailed(f"“{attachment.name}” is too big", permanent=True)
        return attachment.data

    async def stream(self, to: Target) -> _Live:
        return _Live(self, to.chat_id)
