"""The media capability (``media:``): voice notes and audio files heard before their turn
(``media.transcription``), answers spoken too where a chat's ``/voice`` asks
(``media.speech``), and ``/voice``. Always open, so that ``/voice`` says how things stand;
what is switched off builds no client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply
from bot.media.config import MediaConfig

if TYPE_CHECKING:
    from bot.media.hearing import Hearing
    from bot.media.speaking import VoiceAnswers


@dataclass(frozen=True, slots=True)
class Media:
    """The running capability: the stage that hears incoming audio (None: transcription off)
    and the voice answers."""

    incoming: Hearing | None
    voice: VoiceAnswers

    def inbound_stage(self) -> Hearing | None:
        return self.incoming

    def speaking(self) -> VoiceAnswers | None:
        return self.voice if self.voice.available else None


async def _voice(media: Media, call: CommandCall) -> Reply:
    return Reply(await media.voice.command(call.msg.platform, call.msg.chat_id, call.command.args))


@asynccontextmanager
async def open_media(core: Core) -> AsyncIterator[Media]:
    from bot.media.hearing import Hearing
    from bot.media.minutes import AudioMinutes
    from bot.media.speaking import SpeechSettings, VoiceAnswers
    from bot.media.transcription import MediaTranscription, TranscriptionSettings

    media = core.config.section("media", MediaConfig)
    async with AsyncExitStack() as stack:
        clients = {}
        for name in ("transcription", "speech"):
            endpoint = getattr(media, name)
            if endpoint.enabled:
                from bot.media.audio import make_audio  # the SDK: only for an endpoint in use

                client = make_audio(endpoint.provider, api_key=endpoint.api_key.get_secret_value()
                                    if endpoint.api_key is not None else "", base_url=endpoint.base_url,
                                    timeout=endpoint.timeout, key=f"media.{name}.provider")
                stack.push_async_callback(client.aclose)
                clients[name] = client
        t, sp = media.transcription, media.speech
        hearing = None
        if "transcription" in clients:
            allowed = core.limits.settings.audio_minutes_per_day  # a core key: limits.audio_minutes_per_day
            transcription = MediaTranscription(clients["transcription"], TranscriptionSettings(
                t.model, t.max_seconds, int(t.max_mb * 1024 * 1024), media.echo_transcript),
                AudioMinutes(allowed, core.store) if allowed is not None else None)
            hearing = Hearing(transcription, core.channels, core.access, core.workspaces, core.turns.outbox)
        speaker = clients.get("speech")
        yield Media(hearing, VoiceAnswers(core.store, speaker, SpeechSettings(sp.model, sp.voice, sp.max_chars)
                                           if speaker else None))


SPEC = CapabilitySpec("media", open_media, config=MediaConfig, commands=(
    CommandSpec("voice", _voice, "voice answers in this chat: on, off, or auto (a voice message gets one)",
                capability="media"),
))
