"""Approvals and the grants they leave (the ``ApprovalStore`` port, tables of ``0010_approvals``),
written once for both stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.base import ApprovalRecord
from bot.store.op import Driven, count, execute, one, rows

COLUMNS = ("id, run_id, call_id, session_key, platform, chat_id, chat_type, thread_id, tool, requester, "
           "question_id, buttons, outcome, decision, decided_by, asked_at, decided_at")
INSERT = f"INSERT INTO approvals ({COLUMNS}) VALUES ({', '.join('?' * 17)})"
SHOWN = "UPDATE approvals SET question_id = ?, buttons = ? WHERE id = ?"
SETTLE = ("UPDATE approvals SET outcome = ?, decision = ?, decided_by = ?, decided_at = ? "
          "WHERE id = ? AND outcome = 'pending'")
ONE = f"SELECT {COLUMNS} FROM approvals WHERE id = ?"
PENDING = f"SELECT {COLUMNS} FROM approvals WHERE outcome = 'pending' ORDER BY asked_at"
GRANT = ("INSERT INTO approval_grants (scope, holder, tool, shape, granted_by, granted_at) "
         "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, holder, tool, shape) "
         "DO UPDATE SET granted_by = excluded.granted_by, granted_at = excluded.granted_at")
GRANTED = ("SELECT 1 FROM approval_grants WHERE scope = ? AND holder = ? AND tool = ? AND shape IN (?, '*') "
           "AND granted_at >= ?")


def row(record: ApprovalRecord) -> tuple[object, ...]:
    r = record
    return (r.id, r.run_id, r.call_id, r.session_key, r.platform, r.chat_id, r.chat_type, r.thread_id, r.tool,
            r.requester, r.question_id, int(r.buttons), r.outcome, r.decision, r.decided_by, r.asked_at,
            r.decided_at)


def record(v: Sequence[Any]) -> ApprovalRecord:
    return ApprovalRecord(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], bool(v[11]), v[12],
                          v[13], v[14], v[15], v[16])


class ApprovalOps(Driven):
    async def add_approval(self, record: ApprovalRecord) -> None:
        await self._write(execute(INSERT, *row(record)))

    async def approval_shown(self, approval_id: str, question_id: str, buttons: bool) -> None:
        await self._write(execute(SHOWN, question_id, int(buttons), approval_id))

    async def settle_approval(self, approval_id: str, outcome: str, decision: str | None, decided_by: str | None,
                              at: float) -> bool:
        return await self._write(count(SETTLE, outcome, decision, decided_by, at, approval_id)) == 1

    async def approval(self, approval_id: str) -> ApprovalRecord | None:
        found = await self._read(one(ONE, approval_id))
        return None if found is None else record(found)

    async def pending_approvals(self) -> list[ApprovalRecord]:
        return [record(r) for r in await self._read(rows(PENDING))]

    async def grant(self, scope: str, holder: str, tool: str, shape: str, granted_by: str, at: float) -> None:
        await self._write(execute(GRANT, scope, holder, tool, shape, granted_by, at))

    async def granted(self, scope: str, holder: str, tool: str, shape: str, since: float = 0.0) -> bool:
        return await self._read(one(GRANTED, scope, holder, tool, shape, since)) is not None
