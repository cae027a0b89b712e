"""A channel that records what it is asked to send, edit and show (the Channel port's fake),
and an inbox that records what a real channel hands to the core (``RecordingInbox``).

``watch(app.events)`` also records the run events, for tests that wait for a phase of a
run (streaming, retrying, queued)."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass

from bot.agent.events import EventBus, RunEvent
from bot.channels import PLAIN, Choice, Inbox, MessageShape, SendFailed, Status, Streaming, Target
from bot.messages import Attachment, ChatType, InboundMessage, Sender

_ids = itertools.count(1)

# an approval's choices, as the tests of every channel's questions (``Asks``) ask them
CHOICES = (Choice("ap:r1:c1:once", "Allow once", "y"), Choice("ap:r1:c1:session", "Allow for this session", "s"),
           Choice("ap:r1:c1:always", "Always allow", "a"), Choice("ap:r1:c1:deny", "Deny", "n"))


def dm(text: str, user: str = "u1", *, platform: str = "test", message_id: str | None = None) -> InboundMessage:
    return InboundMessage(platform, "bot", user, ChatType.DM, Sender(user, f"User {user}"), text,
                          message_id or f"m{next(_ids)}")


@dataclass(frozen=True, slots=True)
class Sent:
    to: Target
    text: str
    message_id: str

    @property
    def chat_id(self) -> str:
        return self.to.chat_id

    @property
    def reply_to(self) -> str | None:
        return self.to.reply_to


class RecordingChannel:
    dialect = PLAIN
    shape = MessageShape(chunk=4000)
    streaming: Streaming = "off"

    def __init__(self, platform: str = "test") -> None:
        self.name = platform
        self.platform = platform
        self.sent: list[Sent] = []
        self.edits: list[tuple[str, str]] = []
        self.statuses: list[tuple[str, Status]] = []
        self.events: list[RunEvent] = []
        self.files: dict[str, bytes] = {}  # platform_file_id -> content, for fetch
        self.inbox: Inbox | None = None
        self._changed = asyncio.Condition()
        self.stopped = False

    def watch(self, events: EventBus) -> None:
        events.subscribe(self._record_event)

    async def start(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def stop(self) -> None:
        self.stopped = True

    async def wait_closed(self) -> None:
        await asyncio.Event().wait()

    async def send(self, to: Target, text: str) -> str:
        sent = Sent(to, text, str(len(self.sent) + 1))
        async with self._changed:
            self.sent.append(sent)
            self._changed.notify_all()
        return sent.message_id

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        self.edits.append((message_id, text))

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        return await self.send(to, f"[file {name}] {caption}")

    async def status(self, to: Target, status: Status) -> None:
        self.statuses.append((to.chat_id, status))

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        data = self.files.get(attachment.platform_file_id or "")
        if data is None:
            raise SendFailed(f"no file {attachment.platform_file_id}", permanent=True)
        return data

    async def _record_event(self, event: RunEvent) -> None:
        async with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    async def wait_for_event(self, kind: str, text: str | None = None, timeout: float = 5.0) -> RunEvent:
        """The first event of ``kind`` (and of ``text``, or of that phase for an activity)."""
        def match(e: RunEvent) -> bool:
            return e.kind == kind and (text is None or (e.phase or e.text) == text)

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: any(map(match, self.events))), timeout)
        return next(e for e in self.events if match(e))

    async def inject(self, msg: InboundMessage) -> None:
        assert self.inbox is not None, "channel not started"
        await self.inbox(msg)

    async def wait_for_replies(self, n: int, timeout: float = 5.0) -> list[Sent]:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.sent) >= n), timeout)
        return self.sent

    def texts(self) -> list[str]:
        return [r.text for r in self.sent]



class RecordingInbox:
    """The core's ``Inbox`` as a recorder: every message kept at once, with when it came
    (``time.monotonic()``); nothing deduped, so a test sees what the channel handed over."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.times: list[float] = []
        self._changed = asyncio.Event()

    async def __call__(self, msg: InboundMessage) -> None:
        self.messages.append(msg)
        self.times.append(time.monotonic())
        self._changed.set()

    async def wait(self, n: int, timeout: float = 10.0) -> list[InboundMessage]:
        """The first ``n`` messages, once there are that many."""
        async with asyncio.timeout(timeout):
            while len(self.messages) < n:
                self._changed.clear()
                await self._changed.wait()
        return self.messages[:n]
