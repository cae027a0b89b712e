"""A turn's commit fenced by its lane's lease, with several instances (PostgreSQL only; the
history itself is ``bot.store.history``, written once).

A turn that adds to a conversation (messages, an answer, settled messages, writes of whoever
started it) commits only while ``fence(session key)`` names the lease this instance still
holds, unchanged (``bot.cluster.Cluster.fence``); else ``append_turn`` writes nothing of it and
raises ``LaneLost``. The check is part of the statement that writes the turn (``_turn_guard``: every
write is made on the condition that the lease's row, locked ``FOR KEY SHARE``, is found), so the
turn and its check are one round trip, without BEGIN and COMMIT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.store.base import LaneLost, Turn
from bot.store.op import Driven, Row, TurnGuard
from bot.store.pg.sql import NOW, alive


@dataclass(frozen=True, slots=True)
class Fence:
    """What a turn of a session commits under, with several instances: the lease of the session's
    lane, its holder (this instance) and the token it was taken with (None: not held here). The
    commit holds the lease's row meanwhile (``FOR KEY SHARE``: the holder's renewals go on, a
    take-over waits), and the server ends the commit of an instance frozen between two of its
    statements after ``idle_ms``, so that the lease is not held up for ever. The turn's answer is
    claimed for delivery by this instance in the same statement (the ``cluster_deliveries`` row
    ``bot.cluster.work`` claims otherwise), and ``claimed`` is told its id."""

    lease: str
    holder: str
    token: int | None
    idle_ms: int
    lease_seconds: float = 15.0
    claimed: Callable[[str], None] | None = None


# the lane's lease as it was taken, its row locked until the commit (a take-over waits for the turn, or
# the turn sees the take-over), and a bound on the lock should this instance freeze in a transaction
_FENCE = ("fence AS (SELECT set_config('idle_in_transaction_session_timeout', ?, true) FROM cluster_leases"
          " WHERE name = ? AND holder = ? AND token = ? FOR KEY SHARE)")
# the turn's answer claimed for delivery here (as bot.cluster.work claims it), in the same statement
_CLAIM = (
    "claim AS (INSERT INTO cluster_deliveries (answer_id, instance, claimed_at)"
    f" SELECT ?, ?, {NOW} FROM fence ON CONFLICT (answer_id) DO UPDATE SET instance = excluded.instance,"
    " claimed_at = excluded.claimed_at WHERE cluster_deliveries.instance = excluded.instance"
    f" OR NOT {alive('cluster_deliveries.instance', '?')} RETURNING 1)"
)


class PgFencing(Driven):
    _fence: Callable[[str], Fence] | None = None

    def fence_with(self, fence: Callable[[str], Fence]) -> None:
        """Several instances: a turn commits only while ``fence(session key)`` is still this
        instance's lease (see the module)."""
        self._fence = fence

    def _turn_guard(self, turn: Turn) -> TurnGuard | None:
        """The turn's check of its lane's lease (and its answer's claim), in the statement that writes it."""
        if self._fence is None:
            return None
        fence = self._fence(turn.session.key)
        if fence.token is None:
            raise LaneLost(f"session {turn.session.key}: lane not held by {fence.holder}; run {turn.run_id} not stored")
        args: tuple[Any, ...] = (str(fence.idle_ms), fence.lease, fence.holder, fence.token)
        parts, result = _FENCE, "(SELECT count(*) FROM fence)"
        answer = turn.answer
        if answer is not None:
            parts, result = f"{parts}, {_CLAIM}", f"{result}, (SELECT count(*) FROM claim)"
            args += (answer.id, fence.holder, fence.lease_seconds)

        def check(row: Row) -> None:
            if not row[0]:
                raise LaneLost(f"session {turn.session.key}: lane no longer held by {fence.holder}; "
                               f"run {turn.run_id} not stored")
            if answer is not None and row[1] and fence.claimed is not None:
                fence.claimed(answer.id)

        return TurnGuard(parts, args, "fence", result, check)
