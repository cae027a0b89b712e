"""OpenAI's audio API, and any server that speaks it (a local Whisper or TTS server through
``base_url``): ``/audio/transcriptions`` and ``/audio/speech`` through the official SDK.

Imported only when ``media.transcription`` or ``media.speech`` is enabled. Model names and
voices come from the configuration. Failures are classified like the chat provider's
(``sdk_failure``) and retried under the same policy (``RetryPolicy``: Retry-After, backoff
with jitter); what is left is a ``ProviderError`` for the caller to put in one sentence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, TypeVar

import openai

from bot.errors import ConfigError, ProviderError
from bot.providers.failures import TransientError, describe_cause, malformed, refused_connection, status_failure
from bot.providers.retry import RetryPolicy

log = logging.getLogger(__name__)

T = TypeVar("T")
SPEECH_FORMAT: Final = "opus"  # Ogg/Opus: Telegram shows it as a voice note


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    seconds: float | None = None  # the audio's length, when the server reports what it billed


class OpenAIAudio:
    """One SDK client for both endpoints; ``aclose`` closes it."""

    name = "openai"

    def __init__(self, *, api_key: str, base_url: str, timeout: float) -> None:
        self._secret = api_key
        self._policy = RetryPolicy()
        # Local servers need no key, but the SDK refuses an empty one.
        self._client = openai.AsyncOpenAI(api_key=api_key or "unused", base_url=base_url, timeout=timeout,
                                          max_retries=0, http_client=openai.DefaultAioHttpClient())

    async def aclose(self) -> None:
        await self._client.close()

    async def transcribe(self, data: bytes, filename: str, mime_type: str | None, *, model: str) -> Transcript:
        """What ``data`` (an audio file) says."""
        async def call() -> Transcript:
            result = await self._client.audio.transcriptions.create(
                file=(filename, data, mime_type or "application/octet-stream"), model=model, response_format="json")
            usage = getattr(result, "usage", None)
            seconds = usage.seconds if usage is not None and usage.type == "duration" else None
            if not isinstance(result.text, str):
                raise malformed(self.name, "no text in the transcription")
            return Transcript(result.text, seconds)

        return await self._retrying(call, "transcription")

    async def speak(self, text: str, *, model: str, voice: str) -> bytes:
        """``text`` spoken, as Ogg/Opus bytes."""
        async def call() -> bytes:
            response = await self._client.audio.speech.create(model=model, voice=voice, input=text,
                                                              response_format=SPEECH_FORMAT)
            data = response.content
            if not data:
                raise malformed(self.name, "empty speech")
            return data

        return await self._retrying(call, "speech")

    async def _retrying(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        retries = 0
        while True:
            try:
                try:
                    return await call()
                except openai.OpenAIError as err:
                    raise sdk_failure(err, self.name, self._secret) from None
            except TransientError as err:
                delay = self._policy.delay_for(err, retries)  # raises the final ProviderError
                retries += 1
                log.warning("%s %s: %s; retry %d of %d in %.2fs", self.name, what, err.reason, retries,
                            self._policy.max_retries, delay)
                await asyncio.sleep(delay)


def sdk_failure(err: openai.OpenAIError, name: str, secret: str) -> TransientError | ProviderError:
    """The SDK's exception as a retryable failure or our typed error, as the chat provider's."""
    if isinstance(err, openai.APIResponseValidationError):
        return malformed(name, "response does not match the schema")
    if isinstance(err, openai.APIStatusError):
        return status_failure(err.status_code, err.body, err.response.headers, name, secret)
    if isinstance(err, openai.APITimeoutError) and not refused_connection(err):
        return TransientError("timeout", provider=name)
    if isinstance(err, openai.APIConnectionError):
        return TransientError("connection error", provider=name, detail=describe_cause(err, secret))
    return ProviderError(f"{name}: {describe_cause(err, secret)}", provider=name)


def make_audio(name: str, *, api_key: str, base_url: str, timeout: float, key: str) -> OpenAIAudio:
    """The audio client (transcriptions, speech) of provider ``name``, its SDK imported now; ``key``
    is the config key named when the name is unknown. The caller closes it (``aclose``)."""
    if name != "openai":
        raise ConfigError(key, f"unknown audio provider {name!r}", "use one of: openai")
    return OpenAIAudio(api_key=api_key, base_url=base_url, timeout=timeout)
