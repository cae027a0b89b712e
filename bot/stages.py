"""What a capability may do to an answer on its way out, as the turn runner sees it:
``Speaking`` (an answer also owed as a voice note), offered by ``Speaks``; the media capability
offers it. What it may do to a message on its way in is the intake's (``bot.intake.stage``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from bot.messages import Answer, InboundMessage, Target


class Speaking(Protocol):
    async def spoken(self, run_id: str, platform: str, target: Target, msgs: Sequence[InboundMessage],
                     text: str) -> Answer | None:
        """The answer ``text`` to ``msgs`` as a voice note to owe the chat after it, or None."""
        ...


@runtime_checkable
class Speaks(Protocol):
    def speaking(self) -> Speaking | None:
        """What speaks answers, None when voice answers are off."""
        ...
