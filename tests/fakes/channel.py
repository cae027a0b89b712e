"""A channel adapter that records what it is asked to send and show."""

from __future__ import annotations

import asyncio
import itertools

from adapters.base import Handler
from bot.agent.events import RunEvent
from bot.messages import ChatType, InboundMessage, OutboundReply, Sender

_ids = itertools.count(1)


def dm(text: str, user: str = "u1", *, platform: str = "test", message_id: str | None = None) -> InboundMessage:
    return InboundMessage(platform, "bot", user, ChatType.DM, Sender(user, f"User {user}"), text,
                          message_id or f"m{next(_ids)}")


class RecordingAdapter:
    def __init__(self, platform: str = "test") -> None:
        self.platform = platform
        self.sent: list[OutboundReply] = []
        self.events: list[RunEvent] = []
        self.handle: Handler | None = None
        self._new_reply = asyncio.Condition()
        self.stopped = False

    async def start(self, handle: Handler) -> None:
        self.handle = handle

    async def stop(self) -> None:
        self.stopped = True

    async def wait_closed(self) -> None:
        await asyncio.Event().wait()

    async def send(self, reply: OutboundReply) -> str | None:
        async with self._new_reply:
            self.sent.append(reply)
            self._new_reply.notify_all()
        return str(len(self.sent))

    async def show(self, event: RunEvent, inbound: InboundMessage) -> None:
        async with self._new_reply:
            self.events.append(event)
            self._new_reply.notify_all()

    async def wait_for_event(self, kind: str, text: str | None = None, timeout: float = 5.0) -> RunEvent:
        def match(e: RunEvent) -> bool:
            return e.kind == kind and (text is None or e.text == text)

        async with self._new_reply:
            await asyncio.wait_for(self._new_reply.wait_for(lambda: any(map(match, self.events))), timeout)
        return next(e for e in self.events if match(e))

    async def inject(self, msg: InboundMessage) -> None:
        assert self.handle is not None, "adapter not started"
        await self.handle(msg)

    async def wait_for_replies(self, n: int, timeout: float = 5.0) -> list[OutboundReply]:
        async with self._new_reply:
            await asyncio.wait_for(self._new_reply.wait_for(lambda: len(self.sent) >= n), timeout)
        return self.sent

    def texts(self) -> list[str]:
        return [r.text for r in self.sent]
