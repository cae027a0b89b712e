"""A conversation's model and session titles (the ModelStore port) on PostgreSQL; the SQL is
``bot.store.models``'s."""

from __future__ import annotations

import time

from bot.store import models as sql
from bot.store.base import ModelChoice, Session, SessionInfo
from bot.store.pg.base import PgBase
from bot.store.pg.sql import numbered

_CHOSEN = numbered(sql.CHOSEN)
_CHOOSE = numbered(sql.CHOOSE)
_FORGET = numbered(sql.FORGET)
_SET_TITLE = numbered(sql.SET_TITLE)
_TITLE = numbered(sql.TITLE)
_SESSIONS = numbered(sql.SESSIONS)
_ALL_SESSIONS = numbered(sql.ALL_SESSIONS)


class PgModels(PgBase):
    async def chosen_model(self, session_key: str) -> ModelChoice | None:
        row = await self.pool.fetchrow(_CHOSEN, session_key)
        return ModelChoice(*row) if row is not None else None

    async def choose_model(self, session_key: str, choice: ModelChoice | None) -> None:
        if choice is None:
            await self._transact(lambda c: c.execute(_FORGET, session_key))
        else:
            await self._transact(lambda c: c.execute(_CHOOSE, session_key, choice.model, choice.chosen_by,
                                                  choice.chosen_at))

    async def set_title(self, session: Session, title: str, model: str) -> bool:
        now = time.time()
        status = await self._transact(lambda c: c.execute(_SET_TITLE, session.id, title, model, now))
        return status == "INSERT 0 1"

    async def title(self, session: Session) -> str | None:
        found = await self.pool.fetchval(_TITLE, session.id)
        return str(found) if found is not None else None

    async def titled_sessions(self, last: int = 20, *, archived: bool = False) -> list[SessionInfo]:
        rows = await self.pool.fetch(_ALL_SESSIONS if archived else _SESSIONS, last)
        return [SessionInfo(*row) for row in rows]
