"""A turn's commit fenced by its lane's lease, with several instances (PostgreSQL only; the
history itself is ``bot.store.history``, written once).

A turn that adds to a conversation (messages, an answer, settled messages, a closed
occurrence) commits only while ``fence(session key)`` names the lease this instance still
holds, unchanged (``bot.cluster.Cluster.fence``); else ``append_turn`` rolls it back and
raises ``LaneLost``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.store.base import LaneLost, Turn
from bot.store.op import Driven, Op, one, value
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
# the turn sees the take-over), and a bound on the lock should this instance freeze before it commits
_FENCE = ("SELECT set_config('idle_in_transaction_session_timeout', $4, true) FROM cluster_leases"
          " WHERE name = $1 AND holder = $2 AND token = $3 FOR KEY SHARE")
# the same, and the answer claimed for delivery here (as bot.cluster.work claims it): one round trip
_FENCE_CLAIM = (
    f"WITH f AS ({_FENCE}), c AS (INSERT INTO cluster_deliveries (answer_id, instance, claimed_at)"
    f" SELECT $5, $2, {NOW} FROM f ON CONFLICT (answer_id) DO UPDATE SET instance = excluded.instance,"
    " claimed_at = excluded.claimed_at WHERE cluster_deliveries.instance = excluded.instance"
    f" OR NOT {alive('cluster_deliveries.instance', '$6')} RETURNING 1)"
    " SELECT (SELECT count(*) FROM f), (SELECT count(*) FROM c)"
)


def fenced(fence: Fence, turn: Turn) -> Op[None]:
    held = fence.token is not None
    if held and turn.answer is not None:
        found = yield from one(_FENCE_CLAIM, fence.lease, fence.holder, fence.token, str(fence.idle_ms),
                               turn.answer.id, fence.lease_seconds)
        held = found is not None and found[0] > 0
        if held and found is not None and found[1] and fence.claimed is not None:
            fence.claimed(turn.answer.id)
    elif held:
        held = (yield from value(_FENCE, fence.lease, fence.holder, fence.token, str(fence.idle_ms))) is not None
    if not held:
        raise LaneLost(f"session {turn.session.key}: lane no longer held by {fence.holder}; "
                       f"run {turn.run_id} not stored")


class PgFencing(Driven):
    _fence: Callable[[str], Fence] | None = None

    def fence_with(self, fence: Callable[[str], Fence]) -> None:
        """Several instances: a turn commits only while ``fence(session key)`` is still this
        instance's lease (see the module)."""
        self._fence = fence

    def _turn_guard(self, turn: Turn) -> Op[None] | None:
        return None if self._fence is None else fenced(self._fence(turn.session.key), turn)
