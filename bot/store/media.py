"""Voice modes per chat and audio use per person (the ``MediaStore`` port), written once for both stores."""

from __future__ import annotations

import time

from bot.store.op import Driven, execute, value

VOICE_MODE = "SELECT mode FROM voice_modes WHERE platform = ? AND chat_id = ?"
SET_VOICE_MODE = (
    "INSERT INTO voice_modes (platform, chat_id, mode, updated_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (platform, chat_id) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at"
)
RECORD_AUDIO = "INSERT INTO audio_use (person, seconds, created_at) VALUES (?, ?, ?)"
AUDIO_SINCE = "SELECT COALESCE(SUM(seconds), 0.0) FROM audio_use WHERE person = ? AND created_at >= ?"


class MediaOps(Driven):
    async def voice_mode(self, platform: str, chat_id: str) -> str | None:
        mode = await self._read(value(VOICE_MODE, platform, chat_id))
        return None if mode is None else str(mode)

    async def set_voice_mode(self, platform: str, chat_id: str, mode: str) -> None:
        await self._write(execute(SET_VOICE_MODE, platform, chat_id, mode, time.time()))

    async def record_audio(self, person: str, seconds: float, at: float) -> None:
        await self._write(execute(RECORD_AUDIO, person, seconds, at))

    async def audio_since(self, person: str, since: float) -> float:
        return float(await self._read(value(AUDIO_SINCE, person, since)))
