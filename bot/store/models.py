"""A conversation's model and session titles (the ``ModelStore`` port, tables of ``0014_models``),
written once for both stores."""

from __future__ import annotations

import time

from bot.store.base import ModelChoice, Session, SessionInfo
from bot.store.op import Driven, count, execute, one, rows, value

CHOSEN = "SELECT model, chosen_by, chosen_at FROM session_models WHERE session_key = ?"
CHOOSE = ("INSERT INTO session_models (session_key, model, chosen_by, chosen_at) VALUES (?, ?, ?, ?)"
          " ON CONFLICT (session_key) DO UPDATE SET model = excluded.model, chosen_by = excluded.chosen_by,"
          " chosen_at = excluded.chosen_at")
FORGET = "DELETE FROM session_models WHERE session_key = ?"
SET_TITLE = ("INSERT INTO session_titles (session_id, title, model, created_at) VALUES (?, ?, ?, ?)"
             " ON CONFLICT (session_id) DO NOTHING")
TITLE = "SELECT title FROM session_titles WHERE session_id = ?"
_SESSIONS = (  # a subquery: PostgreSQL orders by an output column only when it stands alone
    "SELECT key, id, created_at, archived_at, title, model, last_at FROM ("
    "SELECT s.key, s.id, s.created_at, s.archived_at, t.title, m.model,"
    " (SELECT MAX(u.created_at) FROM usage u WHERE u.session_id = s.id) AS last_at"
    " FROM sessions s LEFT JOIN session_titles t ON t.session_id = s.id"
    " LEFT JOIN session_models m ON m.session_key = s.key"
    " WHERE s.key NOT LIKE '%:sub:%' {archived}) listed"
    " ORDER BY COALESCE(last_at, created_at) DESC, id DESC LIMIT ?"
)
SESSIONS = _SESSIONS.format(archived="AND s.archived_at IS NULL")  # current ones
ALL_SESSIONS = _SESSIONS.format(archived="")  # those /new archived too


class ModelOps(Driven):
    async def chosen_model(self, session_key: str) -> ModelChoice | None:
        found = await self._read(one(CHOSEN, session_key))
        return None if found is None else ModelChoice(*found)

    async def choose_model(self, session_key: str, choice: ModelChoice | None) -> None:
        if choice is None:
            await self._write(execute(FORGET, session_key))
        else:
            await self._write(execute(CHOOSE, session_key, choice.model, choice.chosen_by, choice.chosen_at))

    async def set_title(self, session: Session, title: str, model: str) -> bool:
        return await self._write(count(SET_TITLE, session.id, title, model, time.time())) == 1

    async def title(self, session: Session) -> str | None:
        found = await self._read(value(TITLE, session.id))
        return None if found is None else str(found)

    async def titled_sessions(self, last: int = 20, *, archived: bool = False) -> list[SessionInfo]:
        return [SessionInfo(*r) for r in await self._read(rows(ALL_SESSIONS if archived else SESSIONS, last))]
