"""A voice note or audio file -> its transcript, within the caps and the person's minutes.

``MediaTranscription.hear`` takes the bytes the intake fetched (the file stays in the workspace's
inbox) and returns the transcript, or the one sentence the person gets instead: the file is
too long or too big (``max_seconds``, ``max_mb``), today's minutes are used up
(``limits.audio_minutes_per_day``), the endpoint failed, or it heard nothing. Nothing is
ever handed on as an empty turn. Before the call the length is the longer of the platform's
and the file's own (``audio_length``: Ogg/Opus and PCM WAV, read as a decoder plays them);
a file in another format is taken to be as long as its size allows at a low bitrate
(``longest_seconds``). Once transcribed, the minutes count the largest of the platform's,
the file's and what the endpoint billed (the size bound only when neither of the last two
is known).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.errors import ProviderError
from bot.media.audio_length import longest_seconds, seconds_of
from bot.media.minutes import AudioMinutes
from bot.messages import Attachment, ChatType, InboundMessage

log = logging.getLogger(__name__)

NOT_UNDERSTOOD = "Sorry, I couldn't understand your voice message; please try again, or type it."
NOT_HEARD = "Sorry, I couldn't hear anything in your voice message; please try again, or type it."


@dataclass(frozen=True, slots=True)
class Transcript:
    """A transcript (``refusal`` None), or the sentence the person gets instead."""

    text: str = ""
    refusal: str | None = None
    seconds: float = 0.0


class Transcribed(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def seconds(self) -> float | None:
        """What the endpoint billed, when it says."""
        ...


class Transcriber(Protocol):
    async def transcribe(self, data: bytes, filename: str, mime_type: str | None, *, model: str) -> Transcribed:
        """What ``data`` says (``ProviderError`` when the endpoint fails)."""
        ...


@dataclass(frozen=True, slots=True)
class TranscriptionSettings:
    model: str
    max_seconds: int = 600
    max_bytes: int = 20 * 1024 * 1024
    echo: bool = False  # show the person what was heard before the answer


class MediaTranscription:
    """Audio in a message made text (``media.transcription``), within the caps and the minutes
    each person has; ``payers``: whose minutes (none for an owner). ``bot.media.hearing`` is its stage."""

    nothing_heard = NOT_HEARD

    def __init__(self, transcriber: Transcriber, settings: TranscriptionSettings,
                 minutes: AudioMinutes | None = None) -> None:
        self._transcriber = transcriber
        self.settings = settings
        self._minutes = minutes  # None: audio_minutes_per_day unset

    @property
    def max_bytes(self) -> int:
        return self.settings.max_bytes

    def echo(self, said: str) -> str | None:
        return echo_line(said) if self.settings.echo else None

    @staticmethod
    def wants(msg: InboundMessage) -> bool:
        """The message carries audio not transcribed yet."""
        return any(a.audible and a.transcript is None for a in msg.attachments)

    def may_address(self, msg: InboundMessage) -> bool:
        """A group voice note without a caption that did not address the bot: its transcript may."""
        return msg.chat_type is ChatType.GROUP and not msg.addressed and not msg.text.strip() and self.wants(msg)

    def too_big(self, att: Attachment) -> str | None:
        """The sentence for a file the caps refuse by what the platform says of it (before any download)."""
        s = self.settings
        if att.size is not None and att.size > s.max_bytes:
            return (f"That audio is {att.size / 1048576:.1f} MB; I can transcribe files up to "
                    f"{s.max_bytes / 1048576:.0f} MB.")
        if att.duration is not None and att.duration > s.max_seconds:
            return f"That voice message is {_length(att.duration)} long; I can take up to {_length(s.max_seconds)}."
        return None

    async def refuse_early(self, msg: InboundMessage, payers: Sequence[str] = ()) -> str | None:
        """The sentence for audio refused by what the platform says of it (size, length, the
        minutes left), before it is downloaded; None to go on."""
        todo = [a for a in msg.attachments if a.audible and a.transcript is None]
        for att in todo:
            if (refusal := self.too_big(att)) is not None:
                return refusal
        if self._minutes is not None and payers:
            known = [a.duration for a in todo if a.duration is not None]
            return await self._minutes.check(payers, sum(known) if len(known) == len(todo) else None)
        return None

    async def transcribe(self, att: Attachment, data: bytes, payers: Sequence[str] = ()) -> Transcript:
        """The transcript of ``att`` (``data`` its bytes), counted against ``payers``' minutes
        (none for an owner)."""
        if (refusal := self.too_big(att)) is not None:
            return Transcript(refusal=refusal)
        if len(data) > self.settings.max_bytes:
            return Transcript(refusal=self.too_big(Attachment(att.kind, att.name, size=len(data))))
        measured = await asyncio.to_thread(seconds_of, data)  # a long Ogg file is many pages to walk
        bound = longest_seconds(len(data)) if measured is None else None  # a format that cannot be read
        length = max(n for n in (att.duration, measured, bound, 0.0) if n is not None)
        if length > self.settings.max_seconds:
            if bound is not None and bound >= length:
                return Transcript(refusal=self._unmeasured(len(data), bound))
            return Transcript(refusal=self.too_big(Attachment(att.kind, att.name, duration=length)))
        if self._minutes is not None and payers and (over := await self._minutes.check(payers, length)) is not None:
            return Transcript(refusal=over)
        try:
            result = await self._transcriber.transcribe(data, att.name, att.mime_type, model=self.settings.model)
        except ProviderError as exc:
            log.warning("transcription of %s failed: %s", att.name, exc)
            return Transcript(refusal=NOT_UNDERSTOOD)
        # the largest of what the platform, the file and the endpoint say; the size bound only
        # when neither the file nor the endpoint said
        told = [n for n in (measured, result.seconds) if n is not None]
        seconds = max(att.duration or 0.0, *told) if told else length
        if self._minutes is not None and payers:
            await self._minutes.spend(payers, seconds)
        text = " ".join(result.text.split())
        if not text:
            log.info("transcription of %s was empty (%.1f s of audio)", att.name, seconds)
            return Transcript(refusal=NOT_HEARD, seconds=seconds)
        return Transcript(text, seconds=seconds)

    def _unmeasured(self, size: int, bound: float) -> str:
        return (f"I cannot tell how long that audio is from its format, and at {size / 1048576:.1f} MB it may play "
                f"for up to {_length(bound)}; I can take up to {_length(self.settings.max_seconds)}. Send it as a "
                "voice message, or a shorter file.")


def _length(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def echo_line(transcript: str) -> str:
    """What ``media.echo_transcript`` shows the person before the answer."""
    return f"🎙️ Heard: “{transcript}”"
