"""Voice modes per chat and audio use per person in SQL (the ``MediaStore`` port), shared by
the SQLite store and a future PostgreSQL one."""

from __future__ import annotations

VOICE_MODE = "SELECT mode FROM voice_modes WHERE platform = ? AND chat_id = ?"
SET_VOICE_MODE = (
    "INSERT INTO voice_modes (platform, chat_id, mode, updated_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (platform, chat_id) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at"
)
RECORD_AUDIO = "INSERT INTO audio_use (person, seconds, created_at) VALUES (?, ?, ?)"
AUDIO_SINCE = "SELECT COALESCE(SUM(seconds), 0.0) FROM audio_use WHERE person = ? AND created_at >= ?"
