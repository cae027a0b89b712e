"""Voice answers: ``/voice on|off|auto`` per chat, and an answer spoken as a voice note.

``on``: every answer in the chat is also spoken; ``auto``: an answer to a voice note is;
``off`` (every chat's start): text only. The mode is stored per chat (``bot.media.ops``) and
kept here once read. The text answer always goes first and alone decides what is answered;
the voice note follows it as an answer of its own (stored, then delivered like any), made
from the answer's plain text by ``media.speech`` as Ogg/Opus, so that Telegram shows a
voice bubble (``SendsVoice``) and other platforms an audio file. An answer longer than
``max_chars`` is not spoken, nor is a failed or silent run; a failed synthesis is logged
and the text stands alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.errors import ProviderError
from bot.media import ops
from bot.messages import Answer, AttachmentKind, Chunk, InboundMessage, Target
from bot.outbound.markdown import to_plain
from bot.store.schema_steps import StepStore

log = logging.getLogger(__name__)

MODES = ("on", "off", "auto")
VOICE_FILE = "answer.ogg"
NOT_SET_UP = "Voice answers are not set up here (media.speech in the bot's config)."


class Speaker(Protocol):
    async def speak(self, text: str, *, model: str, voice: str) -> bytes:
        """``text`` spoken, as Ogg/Opus (``ProviderError`` when the endpoint fails)."""
        ...


@dataclass(frozen=True, slots=True)
class SpeechSettings:
    model: str
    voice: str
    max_chars: int = 1000


class VoiceAnswers:
    def __init__(self, store: StepStore, speaker: Speaker | None = None,
                 settings: SpeechSettings | None = None) -> None:
        self._store = store
        self._speaker = speaker
        self._settings = settings
        self._modes: dict[tuple[str, str], str] = {}

    @property
    def available(self) -> bool:
        return self._speaker is not None and self._settings is not None

    async def mode(self, platform: str, chat_id: str) -> str:
        key = (platform, chat_id)
        if key not in self._modes:
            mode = await self._store.read(ops.voice_mode(platform, chat_id))
            self._modes[key] = mode or "off"
        return self._modes[key]

    async def command(self, platform: str, chat_id: str, args: str) -> str:
        """``/voice``'s answer: the chat's mode, set first when ``args`` names one."""
        wanted = args.strip().lower()
        if not wanted:
            current = await self.mode(platform, chat_id)
            return f"Voice answers are {current} here." + ("" if self.available else f" {NOT_SET_UP}")
        if wanted not in MODES:
            return "Use /voice on, /voice off or /voice auto (a voice note is answered with one)."
        if wanted != "off" and not self.available:
            return NOT_SET_UP
        await self._store.write(ops.set_voice_mode(platform, chat_id, wanted))
        self._modes[(platform, chat_id)] = wanted
        return {"on": "Voice answers are on: I'll speak my answers too (long ones stay text).",
                "off": "Voice answers are off.",
                "auto": "Voice answers are on auto: I'll answer a voice message with one."}[wanted]

    async def wanted(self, platform: str, chat_id: str, msgs: Sequence[InboundMessage], text: str) -> bool:
        """Should this answer (its Markdown ``text``) to ``msgs`` be spoken too?"""
        if not self.available or not msgs or len(text) > self._max_chars:
            return False
        mode = await self.mode(platform, chat_id)
        if mode == "auto":
            return any(a.kind is AttachmentKind.VOICE and a.transcript for a in msgs[-1].attachments)
        return mode == "on"

    async def spoken(self, run_id: str, platform: str, target: Target, msgs: Sequence[InboundMessage],
                     text: str) -> Answer | None:
        """The media capability's ``Speaking``: the answer as a voice note, when the chat's /voice asks."""
        if not await self.wanted(platform, target.chat_id, msgs, text):
            return None
        data = await self.speak(text)
        if data is None:
            return None
        return Answer(f"{run_id}-voice", platform, target, (Chunk("", VOICE_FILE, data, voice=True),))

    async def speak(self, text: str) -> bytes | None:
        """The answer's plain text as Ogg/Opus; None when it cannot be spoken."""
        assert self._speaker is not None and self._settings is not None
        plain = to_plain(text).strip()
        if not plain or len(plain) > self._settings.max_chars:
            return None
        try:
            return await self._speaker.speak(plain, model=self._settings.model, voice=self._settings.voice)
        except ProviderError as exc:
            log.warning("a voice answer could not be made: %s", exc)
            return None

    @property
    def _max_chars(self) -> int:
        # the Markdown may be longer than its plain text: the plain text is checked again
        return 4 * self._settings.max_chars if self._settings is not None else 0
