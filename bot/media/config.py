"""``media:``, the config section of voice notes in and voice answers out (composed into the
config by ``bot.config.schema``)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field

from bot.config.types import CapabilitySection, Float, Int, Name, Secret, Section, Url
from bot.config.types import secret as _secret


class AudioEndpointConfig(Section):
    """An OpenAI-compatible audio endpoint (OpenAI, or a local Whisper / TTS server through
    ``base_url``); ``api_key`` null reads OPENAI_API_KEY, and a local server needs none."""

    enabled: bool = False
    provider: Literal["openai"] = "openai"  # the OpenAI audio API, or any server speaking it
    model: Name = "whisper-1"
    base_url: Url = "https://api.openai.com/v1"
    api_key: Secret = _secret("OPENAI_API_KEY")
    timeout: Annotated[Float, Field(gt=0)] = 120.0

    def needs_key(self) -> bool:
        """OpenAI's own endpoint refuses a request without a key; a local server takes one without."""
        return self.enabled and urlsplit(self.base_url).hostname == "api.openai.com"


class TranscriptionConfig(AudioEndpointConfig):
    """Voice notes and audio files in: transcribed, and the transcript is the message."""

    max_seconds: Annotated[Int, Field(ge=1)] = 600  # longer voice notes are refused with a sentence
    max_mb: Annotated[Float, Field(gt=0, le=1024)] = 20.0  # bigger audio files too (OpenAI takes up to 25)


class SpeechConfig(AudioEndpointConfig):
    """Voice answers (``/voice on|off|auto`` per chat), as Opus."""

    model: Name = "gpt-4o-mini-tts"
    voice: Name = "alloy"
    max_chars: Annotated[Int, Field(ge=1, le=4096)] = 1000  # longer answers are sent as text only


class MediaConfig(CapabilitySection):
    transcription: TranscriptionConfig = TranscriptionConfig()
    echo_transcript: bool = False  # show the person what was heard before the answer
    speech: SpeechConfig = SpeechConfig()

    def required_secrets(self) -> tuple[tuple[str, ...], ...]:
        """The media keys that must be set (``chatgate run`` stops without them)."""
        return tuple(("media", name, "api_key") for name in ("transcription", "speech")
                     if getattr(self, name).needs_key())

    def describe(self) -> list[str]:
        from bot.tracing import mask_url

        t, sp = self.transcription, self.speech
        media = [f"voice notes transcribed by {t.model} at {mask_url(t.base_url)} (up to {t.max_seconds} s, "
                 f"{t.max_mb:g} MB)"] if t.enabled else []
        media += [f"voice answers by {sp.model}, voice {sp.voice} (/voice per chat)"] if sp.enabled else []
        return [f"media      {'; '.join(media)}"] if media else []
