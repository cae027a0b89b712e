"""``media:``, the config section of voice notes in and voice answers out (composed into the
config by ``bot.config.schema``)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field

from bot.config.types import CapabilitySection, Float, Int, Name, Secret, Section, Url
from bot.config.types import secret as _secret


class AudioEndpointConfig(Section):
    """An OpenAI-compatible audio endpoint (OpenAI, or a local Whisper / TTS server through
    ``base_url``); ``api_key`` null reads OPENAI_API_KEY, and a local server needs none."""

    enabled: bool = Field(default=False, description="off: the audio is saved in the inbox and the model told so")
    provider: Literal["openai"] = Field(default="openai", description="the OpenAI audio API, or any server that "
        "speaks it (base_url)")
    model: Name = Field(default="whisper-1", description="e.g. gpt-4o-mini-transcribe; a local Whisper server's "
        "model name")
    base_url: Url = Field(default="https://api.openai.com/v1", description="e.g. http://localhost:8000/v1 for a "
        "local server")
    api_key: Secret = _secret("OPENAI_API_KEY", description="needed for api.openai.com only")
    timeout: Annotated[Float, Field(gt=0)] = Field(default=120.0, description="seconds for one transcription")

    def needs_key(self) -> bool:
        """OpenAI's own endpoint refuses a request without a key; a local server takes one without."""
        return self.enabled and urlsplit(self.base_url).hostname == "api.openai.com"


class TranscriptionConfig(AudioEndpointConfig):
    """Voice notes and audio files in: transcribed, and the transcript is the message."""

    max_seconds: Annotated[Int, Field(ge=1)] = Field(default=600, description="longer voice notes are refused with "
        "a sentence, not transcribed")
    max_mb: Annotated[Float, Field(gt=0, le=1024)] = Field(default=20.0, description="bigger audio files too "
        "(OpenAI takes up to 25 MB)")


class SpeechConfig(AudioEndpointConfig):
    """Voice answers (``/voice on|off|auto`` per chat), as Opus."""

    model_config = ConfigDict(json_schema_extra={"descriptions": {
        "enabled": "off: /voice says it is not set up",
        "provider": "the OpenAI speech API, or any server that speaks it (base_url)",
        "timeout": "seconds for one answer spoken"}})

    model: Name = Field(default="gpt-4o-mini-tts", description="e.g. tts-1; a local TTS server's model name")
    voice: Name = Field(default="alloy", description="the endpoint's voice name")
    max_chars: Annotated[Int, Field(ge=1, le=4096)] = Field(default=1000, description="longer answers are sent as "
        "text only")


class MediaConfig(CapabilitySection):
    model_config = ConfigDict(json_schema_extra={"description": "voice and files: docs/guide/voice-and-files.md"})

    transcription: TranscriptionConfig = Field(default=TranscriptionConfig(), description="voice notes and audio "
        "files in: the transcript is the message")
    echo_transcript: bool = Field(default=False, description="show the person what was heard (\"🎙️ Heard: …\") "
        "before the answer")
    speech: SpeechConfig = Field(default=SpeechConfig(), description="voice answers: /voice on|off|auto per chat "
        "(off until a chat asks)")

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
