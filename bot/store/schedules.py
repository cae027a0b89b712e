"""SQL of the schedule tables (``0012_schedules``), shared by the store implementations.

A job's ``next_at`` is its next occurrence (UTC epoch seconds); claiming an occurrence is a
compare-and-set on it (``CLAIM_JOB``: the job must still be active and point at that
instant) together with the insert of the occurrence's row, keyed by (job, instant), so two
claimers of one occurrence cannot both win. Plain SQL with ``?`` placeholders: a PostgreSQL
store numbers them, nothing else (a parameter compared in a CASE is cast, so that PostgreSQL
knows its type).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.conversation import ChannelInfo, Conversation
from bot.messages import ChatType
from bot.session_keys import parse_key
from bot.store.base import Job, JobKind, JobState, RuleKind, When

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
CLAIM_OCCURRENCE = (
    "INSERT INTO occurrences (job_id, at, state, outcome, late, claimed_at, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (job_id, at) DO NOTHING"
)
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
    for column, value in (("person", person), ("platform", platform), ("chat_id", chat_id)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
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
