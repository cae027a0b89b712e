"""Voice modes per chat and audio use per person (the MediaStore port) on PostgreSQL; the SQL
is ``bot.store.media``'s."""

from __future__ import annotations

import time

from bot.store import media as sql
from bot.store.pg.base import PgBase
from bot.store.pg.sql import numbered

_VOICE_MODE = numbered(sql.VOICE_MODE)
_SET_VOICE_MODE = numbered(sql.SET_VOICE_MODE)
_RECORD_AUDIO = numbered(sql.RECORD_AUDIO)
_AUDIO_SINCE = numbered(sql.AUDIO_SINCE)


class PgMedia(PgBase):
    async def voice_mode(self, platform: str, chat_id: str) -> str | None:
        mode = await self.pool.fetchval(_VOICE_MODE, platform, chat_id)
        return str(mode) if mode is not None else None

    async def set_voice_mode(self, platform: str, chat_id: str, mode: str) -> None:
        now = time.time()
        await self._write(lambda c: c.execute(_SET_VOICE_MODE, platform, chat_id, mode, now))

    async def record_audio(self, person: str, seconds: float, at: float) -> None:
        await self._write(lambda c: c.execute(_RECORD_AUDIO, person, seconds, at))

    async def audio_since(self, person: str, since: float) -> float:
        return float(await self.pool.fetchval(_AUDIO_SINCE, person, since))
