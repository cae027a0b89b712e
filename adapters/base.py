"""The ChannelAdapter port every platform (and the terminal) implements.

An adapter turns platform events into ``InboundMessage``s and hands them to the
gateway's ``handle``; the gateway calls back ``show`` with run progress and ``send``
with each part of the final answer. Adapters never import ``bot.agent`` internals.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeAlias

from bot.agent.events import RunEvent
from bot.messages import InboundMessage, OutboundReply

Handler: TypeAlias = Callable[[InboundMessage], Awaitable[None]]


class ChannelAdapter(Protocol):
    platform: str

    async def start(self, handle: Handler) -> None:
        """Begin receiving; returns once the adapter is connected."""
        ...

    async def stop(self) -> None:
        """Stop receiving and release connections; idempotent."""
        ...

    async def send(self, reply: OutboundReply) -> str | None:
        """Deliver one part of an answer; returns the platform message id if any."""
        ...

    async def show(self, event: RunEvent, inbound: InboundMessage) -> None:
        """Show run progress (typing, streamed text, retry notices) for ``inbound``'s chat."""
        ...

    async def wait_closed(self) -> None:
        """Return when the adapter stops on its own (end of input); raise a
        ``ChannelError`` when it cannot go on (a bad token, another poller)."""
        ...
