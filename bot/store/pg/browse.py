"""The dashboard's reads and its audit trail (the BrowseStore and AuditStore ports) on PostgreSQL.

The reads are ``bot.store.browse``'s, written once for both stores in its PostgreSQL dialect;
here they are driven on one pooled connection, in one read-only REPEATABLE READ transaction
per page, so that its several statements see the same moment (a log and its count agree).
"""

from __future__ import annotations

from functools import lru_cache

from bot.store import browse as sql
from bot.store.base import AuditEntry, Failure, SessionLog, SessionSummary, UsageReport
from bot.store.pg.base import Connection, PgBase
from bot.store.pg.history import TRACE, trace_records
from bot.store.pg.sql import numbered
from bot.tracing import TraceRecord

_INSERT_ACTION = numbered(sql.INSERT_ACTION)


@lru_cache(maxsize=256)
def _numbered(statement: str) -> str:
    return numbered(statement)


class PgBrowse(PgBase):
    async def sessions(self, search: str = "", limit: int = 100) -> list[SessionSummary]:
        return await self._browse(sql.read_sessions(sql.POSTGRES, search, limit))

    async def session_log(self, session_id: int, limit: int = 500) -> SessionLog | None:
        return await self._browse(sql.read_session_log(sql.POSTGRES, session_id, limit))

    async def trace(self, run_id: str) -> TraceRecord | None:
        async def read(conn: Connection) -> TraceRecord | None:
            rows = await conn.fetch(TRACE, run_id)
            return (await trace_records(conn, rows))[0] if rows else None

        return await self._with_conn(read)

    async def daily_usage(self, since: float) -> UsageReport:
        return await self._browse(sql.read_daily_usage(sql.POSTGRES, since))

    async def failures(self, limit: int = 20) -> list[Failure]:
        return await self._browse(sql.read_failures(sql.POSTGRES, limit))

    async def record_action(self, entry: AuditEntry) -> None:
        row = sql.action_row(entry)
        await self._transact(lambda c: c.execute(_INSERT_ACTION, *row))

    async def actions(self, limit: int = 50) -> list[AuditEntry]:
        return await self._browse(sql.read_actions(limit))

    async def _browse(self, read: sql.Read[sql.T]) -> sql.T:
        """Drive a shared read: each statement it yields runs here, its rows are sent back."""
        async def run(conn: Connection) -> sql.T:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                try:
                    statement, args = next(read)
                    while True:
                        rows = [tuple(r) for r in await conn.fetch(_numbered(statement), *args)]
                        statement, args = read.send(rows)
                except StopIteration as done:
                    return done.value

        return await self._with_conn(run)
