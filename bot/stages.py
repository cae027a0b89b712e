"""What a capability may do to a message on its way in and to an answer on its way out, as the
hubs see it: ``Transcription`` (a voice note or audio file heard before its turn: the intake's inbound
stage) and ``Speaking`` (an answer also owed as a voice note: the turn runner's). The media
capability offers both (``bot.media``); the hubs know only these Protocols and ``Transcript``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from bot.messages import Answer, Attachment, InboundMessage, Target


@dataclass(frozen=True, slots=True)
class Transcript:
    """A transcript (``refusal`` None), or the sentence the person gets instead."""

    text: str = ""
    refusal: str | None = None
    seconds: float = 0.0


class Transcription(Protocol):
    """Audio in a message made text (``media.transcription``), within the caps and the minutes
    each person has; ``payers``: whose minutes (none for an owner)."""

    nothing_heard: str  # the sentence when a message's audio said nothing

    @property
    def max_bytes(self) -> int: ...

    def wants(self, msg: InboundMessage) -> bool:
        """The message carries audio not transcribed yet."""
        ...

    def may_address(self, msg: InboundMessage) -> bool:
        """A group voice note without a caption that did not address the bot: its transcript may."""
        ...

    def too_big(self, att: Attachment) -> str | None:
        """The sentence for a file the caps refuse by what the platform says of it."""
        ...

    async def refuse_early(self, msg: InboundMessage, payers: Sequence[str] = ()) -> str | None:
        """The sentence for audio refused before it is downloaded; None to go on."""
        ...

    async def transcribe(self, att: Attachment, data: bytes, payers: Sequence[str] = ()) -> Transcript: ...

    def echo(self, said: str) -> str | None:
        """The line that shows the person what was heard, None when that is off."""
        ...


class Speaking(Protocol):
    async def spoken(self, run_id: str, platform: str, target: Target, msgs: Sequence[InboundMessage],
                     text: str) -> Answer | None:
        """The answer ``text`` to ``msgs`` as a voice note to owe the chat after it, or None."""
        ...


@runtime_checkable
class Transcribes(Protocol):
    def transcription(self) -> Transcription | None:
        """What hears audio in messages, None when transcription is off."""
        ...


@runtime_checkable
class Speaks(Protocol):
    def speaking(self) -> Speaking | None:
        """What speaks answers, None when voice answers are off."""
        ...
