"""Approvals and their grants (the ApprovalStore port) on PostgreSQL; rows map as in
``bot.store.approvals``."""

from __future__ import annotations

from bot.store import approvals as sql
from bot.store.base import ApprovalRecord
from bot.store.pg.base import PgBase
from bot.store.pg.sql import numbered

_INSERT = numbered(sql.INSERT)
_SHOWN = numbered(sql.SHOWN)
_SETTLE = numbered(sql.SETTLE)
_ONE = numbered(sql.ONE)
_GRANT = numbered(sql.GRANT)
_GRANTED = numbered(sql.GRANTED)


class PgApprovals(PgBase):
    async def add_approval(self, record: ApprovalRecord) -> None:
        await self._transact(lambda c: c.execute(_INSERT, *sql.row(record)))

    async def approval_shown(self, approval_id: str, question_id: str, buttons: bool) -> None:
        await self._transact(lambda c: c.execute(_SHOWN, question_id, int(buttons), approval_id))

    async def settle_approval(self, approval_id: str, outcome: str, decision: str | None, decided_by: str | None,
                              at: float) -> bool:
        status = await self._transact(lambda c: c.execute(_SETTLE, outcome, decision, decided_by, at, approval_id))
        return status == "UPDATE 1"

    async def approval(self, approval_id: str) -> ApprovalRecord | None:
        row = await self.pool.fetchrow(_ONE, approval_id)
        return sql.record(tuple(row)) if row is not None else None

    async def pending_approvals(self) -> list[ApprovalRecord]:
        return [sql.record(tuple(r)) for r in await self.pool.fetch(sql.PENDING)]

    async def grant(self, scope: str, holder: str, tool: str, shape: str, granted_by: str, at: float) -> None:
        await self._transact(lambda c: c.execute(_GRANT, scope, holder, tool, shape, granted_by, at))

    async def granted(self, scope: str, holder: str, tool: str, shape: str, since: float = 0.0) -> bool:
        return await self.pool.fetchval(_GRANTED, scope, holder, tool, shape, since) is not None
