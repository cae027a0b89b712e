"""What a running capability may add to the intake: an ``InboundStage``, work on a message
before its turn, outside its session's lane, as soon as it arrives (the media capability's
hears a voice note), offered by ``Prepares`` and given the intake's own steps (``Admits``).
The intake knows only these Protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from bot.intake.item import Item
    from bot.messages import InboundMessage


class Admits(Protocol):
    """The intake's own steps, as an ``InboundStage`` may take them for its message."""

    async def admit(self, item: Item) -> bool:
        """Access, the person's limits and a recovered message's age, as the lane checks them:
        False when the message was answered (or kept as context) instead."""
        ...

    async def fetch(self, item: Item, downloaded: Mapping[int, bytes] | None = None) -> InboundMessage | None:
        """The message with its files saved in the workspace's inbox (``downloaded``: bytes by
        ``id`` of their attachment); None after the one sentence."""
        ...

    async def keep_as_context(self, item: Item, msg: InboundMessage) -> None:
        """Keep ``msg`` (``item``'s, as the stage made it) as group context, never answered."""
        ...

    def payers(self, msg: InboundMessage) -> tuple[str, ...]:
        """Whose budgets ``msg`` counts against: none for an owner."""
        ...

    def max_download(self, platform: str) -> int:
        """The largest file taken from ``platform``, in bytes."""
        ...


class InboundStage(Protocol):
    """Work on a message before its turn, outside its session's lane, as soon as it arrives. The
    message it returns is stored as it is (a recovered one is not prepared twice); an urgent
    command it turned out to be runs at once, anything else is decided in its turn."""

    name: str  # what its task is called (``transcribing``)

    def wants(self, msg: InboundMessage) -> bool:
        """``msg`` is this stage's to prepare."""
        ...

    async def prepare(self, item: Item, intake: Admits) -> Item | None:
        """The message as the lane is to decide it (its own checks passed through ``intake``),
        or None when it was answered (or kept as context) already."""
        ...


@runtime_checkable
class Prepares(Protocol):
    def inbound_stage(self) -> InboundStage | None:
        """What prepares messages before their turn, None when that is off."""
        ...
