"""What a chat or a person has been told once (the ``NoteStore`` port, the table of
``0017_notes``), written once for both stores: one upsert decides, in the database, which
instance tells it."""

from __future__ import annotations

from bot.store.op import Driven, count

# a new note, or one whose time is over: recorded (one row changed); one still in force: nothing
CLAIM = ("INSERT INTO notes (subject, note, until) VALUES (?, ?, ?) ON CONFLICT (subject, note)"
         " DO UPDATE SET until = excluded.until WHERE notes.until IS NOT NULL AND notes.until <= ?")


class NoteOps(Driven):
    async def first_note(self, subject: str, note: str, until: float | None, now: float) -> bool:
        return await self._write(count(CLAIM, subject, note, until, now)) == 1
