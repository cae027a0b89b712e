"""The media capability's database operations, written once for both drivers: each chat's
``/voice`` mode (``voice_modes``) and the seconds of audio each person had transcribed
(``audio_use``, for ``limits.audio_minutes_per_day``). Their tables are the core's migrations
(``bot.store.migrations``), applied before this was a capability."""

from __future__ import annotations

import time

from bot.store.op import Op, execute, value

VOICE_MODE = "SELECT mode FROM voice_modes WHERE platform = ? AND chat_id = ?"
SET_VOICE_MODE = (
    "INSERT INTO voice_modes (platform, chat_id, mode, updated_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (platform, chat_id) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at"
)
RECORD_AUDIO = "INSERT INTO audio_use (person, seconds, created_at) VALUES (?, ?, ?)"
AUDIO_SINCE = "SELECT COALESCE(SUM(seconds), 0.0) FROM audio_use WHERE person = ? AND created_at >= ?"


def voice_mode(platform: str, chat_id: str) -> Op[str | None]:
    """The chat's ``/voice`` mode (on, off, auto); None when it never set one."""
    mode = yield from value(VOICE_MODE, platform, chat_id)
    return None if mode is None else str(mode)


def set_voice_mode(platform: str, chat_id: str, mode: str) -> Op[None]:
    yield from execute(SET_VOICE_MODE, platform, chat_id, mode, time.time())


def record_audio(person: str, seconds: float, at: float) -> Op[None]:
    """``seconds`` of audio transcribed for ``person`` at ``at``."""
    yield from execute(RECORD_AUDIO, person, seconds, at)


def audio_since(person: str, since: float) -> Op[float]:
    """Seconds of audio transcribed for ``person`` since ``since``."""
    return float((yield from value(AUDIO_SINCE, person, since)))
