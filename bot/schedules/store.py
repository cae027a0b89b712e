"""Scheduled jobs, their occurrences and people's zones (the ``ScheduleStore`` port, tables of
the core's migration ``0012_schedules``), written once for both stores: operations
(``bot.store.op``) that ``StoredSchedules`` runs with the store's ``read`` and ``write``.

A job's ``next_at`` is its next occurrence (UTC epoch seconds); claiming an occurrence is a
compare-and-set on it (``CLAIM_JOB``: the job must still be active and point at that
instant) together with the insert of the occurrence's row, keyed by (job, instant), so two
claimers of one occurrence cannot both win; each claim of a batch is a savepoint of its own.
(A parameter compared in a CASE is cast, so that PostgreSQL knows its type.)

On PostgreSQL an occurrence also names its claimer, the instance running it (the store's
``claimant``: "" alone on the database). With several instances ``unclosed`` is then a take-over
rather than a read: it returns the running occurrences whose claimer is gone (no heartbeat for a
lease's time, or stopped) or is this instance's earlier life, having made this instance their
claimer in the same statement (``FOR UPDATE SKIP LOCKED``), so that of two instances sweeping at
once only one runs a dead one's task again. A task's turn closes its occurrence in the turn's own
transaction (``Closes``, the ``commits`` of its ``TaskOrder``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from bot.conversation import ChannelInfo, Conversation
from bot.messages import Answer, ChatType
from bot.schedules.jobs import Claim, Closing, Job, JobKind, JobState, Occurrence, RuleKind, When
from bot.session_keys import parse_key
from bot.store.answers import insert_answer
from bot.store.engine import Engine
from bot.store.op import Op, Row, count, execute, inserted, one, rows, value
from bot.store.schema_steps import Claimant, StepStore

OCCURRENCES_KEPT = 30 * 86400  # seconds a closed occurrence's row is kept (the claim key outlives any restart)

COLUMNS = ("id, kind, text, rule, zone, anchor, every, cron, state, next_at, reason, failures, prompt, check_spec, "
           "creator, creator_name, session_key, platform, account, chat_id, chat_type, thread_id, linked, created_at, "
           "people")
WIDTH = len(COLUMNS.split(","))  # a job's columns in a row; an occurrence's follow them (UNCLOSED)
_INSERT_COLUMNS = ("kind, text, rule, zone, anchor, every, cron, state, next_at, reason, failures, prompt, check_spec, "
                   "person, creator, creator_name, session_key, platform, account, chat_id, chat_type, thread_id, "
                   "linked, created_at, updated_at, people")
INSERT = f"INSERT INTO jobs ({_INSERT_COLUMNS}) VALUES ({', '.join('?' * 26)})"
COUNT_OPEN = "SELECT COUNT(*) FROM jobs WHERE person = ? AND state IN ('active', 'paused')"
ONE = f"SELECT {COLUMNS} FROM jobs WHERE id = ?"
NEXT_DUE = "SELECT MIN(next_at) FROM jobs WHERE state = 'active'"
DUE = f"SELECT {COLUMNS} FROM jobs WHERE state = 'active' AND next_at <= ? ORDER BY next_at, id LIMIT ?"
_CLAIM_OCCURRENCE = (
    "INSERT INTO occurrences (job_id, at, state, outcome, late, claimed_at, closed_at{by})"
    " VALUES (?, ?, ?, ?, ?, ?, ?{mark}) ON CONFLICT (job_id, at) DO NOTHING"
)
CLAIM_OCCURRENCE = _CLAIM_OCCURRENCE.format(by="", mark="")
CLAIM_OCCURRENCE_BY = _CLAIM_OCCURRENCE.format(by=", claimer", mark=", ?")  # PostgreSQL's name their claimer
CLAIM_JOB = (
    "UPDATE jobs SET next_at = ?, state = ?, updated_at = ? WHERE id = ? AND state = 'active' AND next_at = ?"
)
TRIM_OCCURRENCES = "DELETE FROM occurrences WHERE job_id = ? AND state = 'closed' AND at < ?"
CLOSE = ("UPDATE occurrences SET state = 'closed', outcome = ?, closed_at = ? "
         "WHERE job_id = ? AND at = ? AND state = 'running'")
COUNT_FAILURE = ("UPDATE jobs SET failures = CASE WHEN CAST(? AS TEXT) = 'failed' THEN failures + 1 "
                 "WHEN CAST(? AS TEXT) IN ('completed', 'silent', 'skipped') THEN 0 ELSE failures END, updated_at = ? "
                 "WHERE id = ?")
FAILURES = "SELECT failures FROM jobs WHERE id = ?"
UNCLOSED = (
    f"SELECT {', '.join('j.' + c.strip() for c in COLUMNS.split(','))}, o.at, o.late, o.claimed_at"
    " FROM occurrences o JOIN jobs j ON j.id = o.job_id WHERE o.state = 'running' ORDER BY o.claimed_at, o.job_id"
)
ZONE = "SELECT zone FROM person_zones WHERE person = ?"
SET_ZONE = ("INSERT INTO person_zones (person, zone, set_at) VALUES (?, ?, ?)"
            " ON CONFLICT (person) DO UPDATE SET zone = excluded.zone, set_at = excluded.set_at")
FORGET_ZONE = "DELETE FROM person_zones WHERE person = ?"


@cache
def _take_over() -> str:
    """$1: this instance, $2: when this life began, $3: a lease's seconds (PostgreSQL only)."""
    from bot.store.pg.sql import alive  # several instances: PostgreSQL's driver is loaded already

    job_columns = ", ".join("j." + c.strip() for c in COLUMNS.split(","))
    return (
        "WITH gone AS (SELECT o.job_id, o.at FROM occurrences o WHERE o.state = 'running'"
        " AND (o.claimer = '' OR (o.claimer = $1 AND o.claimed_at < $2)"
        f" OR (o.claimer <> $1 AND NOT {alive('o.claimer', '$3')}))"
        " FOR UPDATE OF o SKIP LOCKED),"
        " taken AS (UPDATE occurrences o SET claimer = $1 FROM gone"
        " WHERE o.job_id = gone.job_id AND o.at = gone.at RETURNING o.job_id, o.at, o.late, o.claimed_at)"
        f" SELECT {job_columns}, t.at, t.late, t.claimed_at FROM taken t JOIN jobs j ON j.id = t.job_id"
        " ORDER BY t.claimed_at, t.job_id"
    )


def update(states: int) -> str:
    """Move a job in one of ``states`` states (placeholders last) to a state; making it active again
    clears its failures."""
    return ("UPDATE jobs SET state = ?, next_at = ?, reason = ?, "
            "failures = CASE WHEN CAST(? AS TEXT) = 'active' AND state <> 'active' THEN 0 ELSE failures END, "
            "updated_at = ? "
            f"WHERE id = ? AND state IN ({', '.join('?' * states)})")


def listing(person: str | None, platform: str | None, chat_id: str | None,
            states: Sequence[JobState]) -> tuple[str, tuple[Any, ...]]:
    """The query of ``JobStore.jobs`` and its parameters."""
    where = [f"state IN ({', '.join('?' * len(states))})"]
    args: list[Any] = [str(s) for s in states]
    for column, wanted in (("person", person), ("platform", platform), ("chat_id", chat_id)):
        if wanted is not None:
            where.append(f"{column} = ?")
            args.append(wanted)
    return f"SELECT {COLUMNS} FROM jobs WHERE {' AND '.join(where)} ORDER BY id", tuple(args)


def row(job: Job, now: float) -> tuple[Any, ...]:
    """The values of ``INSERT``."""
    w, c = job.when, job.conversation
    return (str(job.kind), job.text, str(w.kind), w.zone, w.anchor, w.every, w.cron, str(job.state), job.next_at,
            job.reason, job.failures, job.prompt, job.check, job.person, job.creator, job.creator_name,
            c.session_key, c.platform, c.account, c.chat_id, str(c.chat_type), c.thread_id, c.person,
            job.created_at or now, now, " ".join(job.others))


def job_from(v: Sequence[Any]) -> Job:
    """A ``COLUMNS`` row as a Job, its conversation rebuilt (channel info is the app's to add)."""
    (id_, kind, text, rule, zone, anchor, every, cron, state, next_at, reason, failures, prompt, check, creator,
     creator_name, session_key, platform, account, chat_id, chat_type, thread_id, linked, created_at,
     people) = v[:WIDTH]
    conversation = Conversation(parse_key(session_key), platform, account, chat_id, ChatType(chat_type), thread_id,
                                linked, ChannelInfo(platform))
    return Job(id_, JobKind(kind), text, When(RuleKind(rule), zone, anchor, every, cron), conversation, creator,
               creator_name, JobState(state), next_at, reason, failures, prompt, check, created_at,
               tuple(people.split()))


def add(d: Engine, job: Job, max_per_person: int, now: float) -> Op[Job | None]:
    if d.xact_lock:  # the cap, one request at a time
        yield from execute(d.xact_lock, job.person)
    if (yield from value(COUNT_OPEN, job.person)) >= max_per_person:
        return None
    job_id = yield from inserted(INSERT, *row(job, now))
    found = yield from one(ONE, job_id)
    assert found is not None
    return job_from(found)


def move(job_id: int, expect: Sequence[JobState], state: JobState, next_at: int | None, reason: str,
         answer: Answer | None, now: float) -> Op[bool]:
    changed = yield from count(update(len(expect)), str(state), next_at, reason, str(state), now, job_id,
                               *(str(s) for s in expect))
    if changed != 1:
        return False
    if answer is not None:
        yield from insert_answer(answer)
    return True


def claim(claims: Sequence[Claim], now: float, claimer: str | None) -> Op[list[bool]]:
    won = []
    for c in claims:
        yield from execute("SAVEPOINT claim")
        closed = c.answer is not None  # a reminder: its answer is owed, the occurrence is over
        occurrence = (c.job_id, c.at, "closed" if closed else "running", "sent" if closed else None, c.late, now,
                      now if closed else None)
        fresh = (yield from (count(CLAIM_OCCURRENCE, *occurrence) if claimer is None
                             else count(CLAIM_OCCURRENCE_BY, *occurrence, claimer))) == 1
        state = str(JobState.ACTIVE if c.next_at is not None else JobState.DONE)
        if not fresh or (yield from count(CLAIM_JOB, c.next_at, state, now, c.job_id, c.at)) != 1:
            yield from execute("ROLLBACK TO claim")  # the job moved on meanwhile: nothing of it stays
            yield from execute("RELEASE claim")
            won.append(False)
            continue
        if c.answer is not None:
            yield from insert_answer(c.answer)
        yield from execute(TRIM_OCCURRENCES, c.job_id, int(now) - OCCURRENCES_KEPT)
        yield from execute("RELEASE claim")
        won.append(True)
    return won


def close(closing: Closing, now: float) -> Op[int | None]:
    """Close a running occurrence (in the caller's transaction: a turn's, or its own) and count it
    in its job's failures in a row; those failures, or None when it was not running."""
    c = closing
    if (yield from count(CLOSE, c.outcome, now, c.job_id, c.at)) != 1:
        return None
    yield from execute(COUNT_FAILURE, c.outcome, c.outcome, now, c.job_id)
    found = yield from value(FAILURES, c.job_id)
    return None if found is None else int(found)


def close_with(closing: Closing, answer: Answer | None, now: float) -> Op[int | None]:
    failures = yield from close(closing, now)
    if failures is not None and answer is not None:
        yield from insert_answer(answer)
    return failures


@dataclass(frozen=True, slots=True)
class Closes:
    """What a task's turn writes in its own transaction (``TaskOrder.commits``): the occurrence
    ``at`` of ``job_id`` closed with how the turn ended, so that a restart never runs it again."""

    job_id: int
    at: int

    def __call__(self, outcome: str, now: float) -> Op[int | None]:
        return close(Closing(self.job_id, self.at, outcome), now)


def take_over(claimant: Claimant) -> Op[list[Row]]:
    return rows(_take_over(), claimant.instance, claimant.since, claimant.lease_seconds)


class StoredSchedules:
    """The ``ScheduleStore`` on the one store: its operations run by the store's ``read`` and ``write``."""

    def __init__(self, store: StepStore) -> None:
        self._store = store

    async def add_job(self, job: Job, *, max_per_person: int) -> Job | None:
        return await self._store.write(add(self._store.engine, job, max_per_person, time.time()))

    async def job(self, job_id: int) -> Job | None:
        found = await self._store.read(one(ONE, job_id))
        return None if found is None else job_from(found)

    async def jobs(self, *, person: str | None = None, platform: str | None = None, chat_id: str | None = None,
                   states: Sequence[JobState] = (JobState.ACTIVE, JobState.PAUSED)) -> list[Job]:
        query, args = listing(person, platform, chat_id, states)
        return [job_from(r) for r in await self._store.read(rows(query, *args))]

    async def update_job(self, job_id: int, *, expect: Sequence[JobState], state: JobState,
                         next_at: int | None = None, reason: str = "", answer: Answer | None = None) -> bool:
        return await self._store.write(move(job_id, expect, state, next_at, reason, answer, time.time()))

    async def next_due(self) -> int | None:
        found = await self._store.read(value(NEXT_DUE))
        return None if found is None else int(found)

    async def due(self, until: int, limit: int) -> list[Job]:
        return [job_from(r) for r in await self._store.read(rows(DUE, until, limit))]

    async def claim(self, claims: Sequence[Claim]) -> list[bool]:
        claimant = self._store.claimant  # None: SQLite's occurrences name no claimer
        return await self._store.write(claim(claims, time.time(), None if claimant is None else claimant.instance))

    async def close_occurrence(self, closing: Closing, answer: Answer | None = None) -> int | None:
        return await self._store.write(close_with(closing, answer, time.time()))

    async def unclosed(self) -> list[Occurrence]:
        claimant = self._store.claimant
        found = await (self._store.write(take_over(claimant)) if claimant is not None and claimant.instance
                       else self._store.read(rows(UNCLOSED)))
        return [Occurrence(job_from(r), *r[WIDTH:WIDTH + 3]) for r in found]

    async def zone(self, person: str) -> str | None:
        found = await self._store.read(value(ZONE, person))
        return None if found is None else str(found)

    async def set_zone(self, person: str, zone: str | None) -> None:
        if zone is None:
            await self._store.write(execute(FORGET_ZONE, person))
        else:
            await self._store.write(execute(SET_ZONE, person, zone, time.time()))
