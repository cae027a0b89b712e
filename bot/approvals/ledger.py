"""The approvals' records and the grants they leave (tables of the core's ``0010_approvals``),
written once for both stores and run through ``AppStore.read`` and ``AppStore.write``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.store.op import Op, count, execute, one, rows


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """A tool call that waited (or waits) for a person's decision."""

    id: str
    run_id: str
    call_id: str
    session_key: str
    platform: str
    chat_id: str
    chat_type: str
    thread_id: str | None
    tool: str
    requester: str  # platform:user_id
    question_id: str | None = None
    buttons: bool = False
    outcome: str = "pending"  # bot.tools.approval.Outcome
    decision: str | None = None  # bot.tools.approval.Decision
    decided_by: str | None = None
    asked_at: float = 0.0
    decided_at: float | None = None


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


def _row(record: ApprovalRecord) -> tuple[object, ...]:
    r = record
    return (r.id, r.run_id, r.call_id, r.session_key, r.platform, r.chat_id, r.chat_type, r.thread_id, r.tool,
            r.requester, r.question_id, int(r.buttons), r.outcome, r.decision, r.decided_by, r.asked_at,
            r.decided_at)


def _record(v: Sequence[Any]) -> ApprovalRecord:
    return ApprovalRecord(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], bool(v[11]), v[12],
                          v[13], v[14], v[15], v[16])


def add_approval(record: ApprovalRecord) -> Op[None]:
    yield from execute(INSERT, *_row(record))


def approval_shown(approval_id: str, question_id: str, buttons: bool) -> Op[None]:
    """The card is in the chat: its platform id, and whether it has buttons."""
    yield from execute(SHOWN, question_id, int(buttons), approval_id)


def settle_approval(approval_id: str, outcome: str, decision: str | None, decided_by: str | None,
                    at: float) -> Op[bool]:
    """End a pending approval; False when it had ended already (the first ending wins)."""
    return (yield from count(SETTLE, outcome, decision, decided_by, at, approval_id)) == 1


def approval(approval_id: str) -> Op[ApprovalRecord | None]:
    found = yield from one(ONE, approval_id)
    return None if found is None else _record(found)


def pending_approvals() -> Op[list[ApprovalRecord]]:
    """Approvals not ended yet, oldest first (after a restart: cards to expire)."""
    return [_record(r) for r in (yield from rows(PENDING))]


def grant(scope: str, holder: str, tool: str, shape: str, granted_by: str, at: float) -> Op[None]:
    """Remember a grant (again: its time is renewed): ``scope`` "session" (holder: one life of a
    session and one person, ``<session id>:<platform>:<user id>``; shape "*": any call of the
    tool) or "always" (holder: the person; shape: the exact call)."""
    yield from execute(GRANT, scope, holder, tool, shape, granted_by, at)


def granted(scope: str, holder: str, tool: str, shape: str, since: float = 0.0) -> Op[bool]:
    """Whether a grant covers the call, given at ``since`` or later."""
    return (yield from one(GRANTED, scope, holder, tool, shape, since)) is not None
