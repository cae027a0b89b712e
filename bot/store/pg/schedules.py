"""Scheduled occurrences with several instances (PostgreSQL only; the port itself is
``bot.store.schedules``, written once).

An occurrence has a claimer, the instance running it (``claim_as``). ``unclosed`` is then a
take-over rather than a read: it returns the running occurrences whose claimer is gone (no
heartbeat for a lease's time, or stopped) or is this instance's earlier life, having made
this instance their claimer in the same statement (``FOR UPDATE SKIP LOCKED``), so that of two
instances sweeping at once only one runs a dead one's task again.
"""

from __future__ import annotations

import time

from bot.store import schedules as sql
from bot.store.op import Driven, Op, Row, rows
from bot.store.pg.sql import alive

_JOB_COLUMNS = ", ".join("j." + c.strip() for c in sql.COLUMNS.split(","))
_TAKE_OVER = (  # $1: this instance, $2: when this life began, $3: a lease's seconds
    "WITH gone AS (SELECT o.job_id, o.at FROM occurrences o WHERE o.state = 'running'"
    " AND (o.claimer = '' OR (o.claimer = $1 AND o.claimed_at < $2)"
    f" OR (o.claimer <> $1 AND NOT {alive('o.claimer', '$3')}))"
    " FOR UPDATE OF o SKIP LOCKED),"
    " taken AS (UPDATE occurrences o SET claimer = $1 FROM gone"
    " WHERE o.job_id = gone.job_id AND o.at = gone.at RETURNING o.job_id, o.at, o.late, o.claimed_at)"
    f" SELECT {_JOB_COLUMNS}, t.at, t.late, t.claimed_at FROM taken t JOIN jobs j ON j.id = t.job_id"
    " ORDER BY t.claimed_at, t.job_id"
)


class PgClaims(Driven):
    _claimer: str | None = ""  # the instance that claims occurrences; "" alone on the database
    _since = 0.0  # when this instance began claiming as itself
    _lease_seconds = 15.0

    def claim_as(self, instance: str, lease_seconds: float) -> None:
        """Several instances share the database: occurrences are claimed as ``instance``, and
        ``unclosed`` takes over those of instances silent for ``lease_seconds``."""
        self._claimer, self._since, self._lease_seconds = instance, time.time(), lease_seconds

    def _take_over(self) -> Op[list[Row]] | None:
        if not self._claimer:
            return None
        return rows(_TAKE_OVER, self._claimer, self._since, self._lease_seconds)
