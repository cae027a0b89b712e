"""Scheduled jobs, their occurrences and people's zones (the ScheduleStore port) on
PostgreSQL; the SQL and the row mapping are ``bot.store.schedules``'s.

With several instances an occurrence has a claimer, the instance running it (``claim_as``).
``unclosed`` is then a take-over rather than a read: it returns the running occurrences
whose claimer is gone (no heartbeat for a lease's time, or stopped) or is this instance's
earlier life, having made this instance their claimer in the same statement, so that of two
instances sweeping at once only one runs a dead one's task again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bot.messages import Answer
from bot.store import schedules as sql
from bot.store.base import Claim, Closing, Job, JobState, Occurrence
from bot.store.pg.answers import insert_answer
from bot.store.pg.base import Connection, PgBase
from bot.store.pg.sql import alive, numbered

_INSERT = numbered(sql.INSERT) + " RETURNING id"
_COUNT_OPEN = numbered(sql.COUNT_OPEN)
_ONE = numbered(sql.ONE)
_NEXT_DUE = sql.NEXT_DUE
_DUE = numbered(sql.DUE)
_CLAIM_OCCURRENCE = (  # sql.CLAIM_OCCURRENCE with the claimer, a column of PostgreSQL's table only
    "INSERT INTO occurrences (job_id, at, state, outcome, late, claimed_at, closed_at, claimer)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (job_id, at) DO NOTHING"
)
_CLAIM_JOB = numbered(sql.CLAIM_JOB)
_TRIM = numbered(sql.TRIM_OCCURRENCES)
_CLOSE = numbered(sql.CLOSE)
_COUNT_FAILURE = numbered(sql.COUNT_FAILURE)
_FAILURES = numbered(sql.FAILURES)
_UNCLOSED = numbered(sql.UNCLOSED)
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
_ZONE = numbered(sql.ZONE)
_SET_ZONE = numbered(sql.SET_ZONE)
_FORGET_ZONE = numbered(sql.FORGET_ZONE)


class PgSchedules(PgBase):
    _claimer: str | None = ""  # the instance that claims occurrences; "" alone on the database
    _since = 0.0  # when this instance began claiming as itself
    _lease_seconds = 15.0

    def claim_as(self, instance: str, lease_seconds: float) -> None:
        """Several instances share the database: occurrences are claimed as ``instance``, and
        ``unclosed`` takes over those of instances silent for ``lease_seconds``."""
        self._claimer, self._since, self._lease_seconds = instance, time.time(), lease_seconds

    async def add_job(self, job: Job, *, max_per_person: int) -> Job | None:
        values = sql.row(job, time.time())

        async def write(conn: Connection) -> Job | None:
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", job.person)  # the cap, one at a time
            if await conn.fetchval(_COUNT_OPEN, job.person) >= max_per_person:
                return None
            job_id = await conn.fetchval(_INSERT, *values)
            row = await conn.fetchrow(_ONE, job_id)
            assert row is not None
            return sql.job_from(tuple(row))

        return await self._transact(write)

    async def job(self, job_id: int) -> Job | None:
        row = await self.pool.fetchrow(_ONE, job_id)
        return sql.job_from(tuple(row)) if row is not None else None

    async def jobs(self, *, person: str | None = None, platform: str | None = None, chat_id: str | None = None,
                   states: Sequence[JobState] = (JobState.ACTIVE, JobState.PAUSED)) -> list[Job]:
        query, args = sql.listing(person, platform, chat_id, states)
        return [sql.job_from(tuple(r)) for r in await self.pool.fetch(numbered(query), *args)]

    async def update_job(self, job_id: int, *, expect: Sequence[JobState], state: JobState,
                         next_at: int | None = None, reason: str = "", answer: Answer | None = None) -> bool:
        args = (str(state), next_at, reason, str(state), time.time(), job_id, *(str(s) for s in expect))
        query = numbered(sql.update(len(expect)))

        async def write(conn: Connection) -> bool:
            if await conn.execute(query, *args) != "UPDATE 1":
                return False
            if answer is not None:
                await insert_answer(conn, answer)
            return True

        return await self._transact(write)

    async def next_due(self) -> int | None:
        value = await self.pool.fetchval(_NEXT_DUE)
        return None if value is None else int(value)

    async def due(self, until: int, limit: int) -> list[Job]:
        return [sql.job_from(tuple(r)) for r in await self.pool.fetch(_DUE, until, limit)]

    async def claim(self, claims: Sequence[Claim]) -> list[bool]:
        now = time.time()

        async def one(conn: Connection, c: Claim) -> bool:
            closed = c.answer is not None  # a reminder: its answer is owed, the occurrence is over
            state = str(JobState.ACTIVE if c.next_at is not None else JobState.DONE)
            async with conn.transaction():  # a savepoint: a lost claim leaves nothing behind
                if await conn.execute(_CLAIM_OCCURRENCE, c.job_id, c.at, "closed" if closed else "running",
                                      "sent" if closed else None, c.late, now, now if closed else None,
                                      self._claimer) != "INSERT 0 1":
                    return False
                if await conn.execute(_CLAIM_JOB, c.next_at, state, now, c.job_id, c.at) != "UPDATE 1":
                    raise _Lost  # the job moved on meanwhile: the occurrence's row goes with the savepoint
                if c.answer is not None:
                    await insert_answer(conn, c.answer)
                await conn.execute(_TRIM, c.job_id, int(now) - sql.OCCURRENCES_KEPT)
                return True

        async def write(conn: Connection) -> list[bool]:
            won = []
            for c in claims:
                try:
                    won.append(await one(conn, c))
                except _Lost:
                    won.append(False)
            return won

        return await self._transact(write)

    async def close_occurrence(self, closing: Closing, answer: Answer | None = None) -> int | None:
        now = time.time()

        async def write(conn: Connection) -> int | None:
            failures = await close_occurrence_in(conn, closing, now)
            if failures is not None and answer is not None:
                await insert_answer(conn, answer)
            return failures

        return await self._transact(write)

    async def unclosed(self) -> list[Occurrence]:
        if not self._claimer:
            rows = await self.pool.fetch(_UNCLOSED)
        else:
            rows = await self._transact(lambda c: c.fetch(_TAKE_OVER, self._claimer, self._since, self._lease_seconds))
        return [Occurrence(sql.job_from(tuple(r)), *r[sql.WIDTH:sql.WIDTH + 3]) for r in rows]

    async def zone(self, person: str) -> str | None:
        found = await self.pool.fetchval(_ZONE, person)
        return str(found) if found is not None else None

    async def set_zone(self, person: str, zone: str | None) -> None:
        if zone is None:
            await self._transact(lambda c: c.execute(_FORGET_ZONE, person))
        else:
            now = time.time()
            await self._transact(lambda c: c.execute(_SET_ZONE, person, zone, now))


class _Lost(Exception):
    """A claim whose job moved on meanwhile: its savepoint is rolled back."""


async def close_occurrence_in(conn: Connection, closing: Closing, now: float) -> int | None:
    """Close a running occurrence in the caller's transaction and count it in its job's failures
    in a row; those failures, or None when it was not running."""
    c = closing
    if await conn.execute(_CLOSE, c.outcome, now, c.job_id, c.at) != "UPDATE 1":
        return None
    await conn.execute(_COUNT_FAILURE, c.outcome, c.outcome, now, c.job_id)
    found = await conn.fetchval(_FAILURES, c.job_id)
    return int(found) if found is not None else None
