"""The schedules' nouns and their store port, ``ScheduleStore``: jobs, their occurrences and
people's time zones (its operations on the one store: ``bot.schedules.store``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.conversation import Conversation
from bot.messages import Answer


class JobKind(StrEnum):
    REMINDER = "reminder"  # text sent at the time, no model call
    TASK = "task"  # a turn of the turn runner, its answer delivered and kept in the history


class JobState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"  # by its creator, after failures, or because its creator lost access
    DONE = "done"  # a one-shot that ran
    MISSED = "missed"  # a one-shot whose time passed beyond the grace while the bot was down
    CANCELLED = "cancelled"


class RuleKind(StrEnum):
    AT = "at"
    EVERY = "every"
    CRON = "cron"


@dataclass(frozen=True, slots=True)
class When:
    """A job's rule with its IANA zone (``bot.schedules.rules`` computes with it). ``anchor``
    (UTC epoch seconds) is the instant of an ``at`` rule and the first occurrence of an
    ``every`` rule; ``every`` is its interval in seconds; ``cron`` a 5-field expression."""

    kind: RuleKind
    zone: str
    anchor: int = 0
    every: int = 0
    cron: str = ""


@dataclass(frozen=True, slots=True)
class Job:
    """A scheduled job: its rule, what it does, and the conversation it belongs to (rebuilt
    from what is stored: the chat, the session key, the creator's linked person).

    ``next_at`` is the next occurrence as a UTC instant (epoch seconds), None once the job is
    finished. ``check`` is the JSON of a task's check (``bot.schedules.checks``), if any."""

    id: int
    kind: JobKind
    text: str
    when: When
    conversation: Conversation
    creator: str  # the creator's user id on the conversation's platform
    creator_name: str = ""
    state: JobState = JobState.ACTIVE
    next_at: int | None = None
    reason: str = ""  # why it is paused or finished, when it was not its creator's doing
    failures: int = 0  # failed runs in a row
    prompt: str = "full"  # a task's system prompt: full | minimal
    check: str | None = None
    created_at: float = 0.0
    others: tuple[str, ...] = ()  # the other people it was asked for (user ids): it runs with the least rights

    @property
    def people(self) -> tuple[str, ...]:
        """Every user id the job acts for, its creator last."""
        return (*self.others, self.creator)

    @property
    def person(self) -> str:
        """Whom the job counts against (``bot.limits.limit_keys``): the linked person, else
        ``platform:user_id``."""
        c = self.conversation
        return f"person:{c.person}" if c.person else f"{c.platform}:{self.creator}"

    @property
    def recurring(self) -> bool:
        return self.when.kind is not RuleKind.AT


@dataclass(frozen=True, slots=True)
class Closing:
    """How one occurrence of a job ended: ``outcome`` is sent | completed | silent | failed |
    stopped | skipped | busy | limited | denied | missed."""

    job_id: int
    at: int
    outcome: str

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"


@dataclass(frozen=True, slots=True)
class Claim:
    """One occurrence to claim: it is ``at`` of ``job_id`` (whose ``next_at`` must still be
    ``at``); the job moves on to ``next_at`` (None: it is done). ``answer``, for a reminder,
    is stored in the claim's transaction and the occurrence is closed ``sent`` at once."""

    job_id: int
    at: int
    next_at: int | None
    late: int = 0  # seconds after ``at`` that it runs
    answer: Answer | None = None


@dataclass(frozen=True, slots=True)
class Occurrence:
    """A claimed occurrence that never closed (the process died while its task ran)."""

    job: Job
    at: int
    late: int
    claimed_at: float


class JobStore(Protocol):
    """Jobs: added (within a person's cap), read, listed, and changed by compare-and-set."""

    async def add_job(self, job: Job, *, max_per_person: int) -> Job | None:
        """Store a new job (its ``id`` is ignored) and return it with its id; None, and nothing
        stored, when ``job.person`` has ``max_per_person`` active or paused jobs already."""
        ...

    async def job(self, job_id: int) -> Job | None: ...

    async def jobs(self, *, person: str | None = None, platform: str | None = None, chat_id: str | None = None,
                   states: Sequence[JobState] = (JobState.ACTIVE, JobState.PAUSED)) -> list[Job]:
        """Jobs in ``states``, of one person and chat or of everyone, oldest first."""
        ...

    async def update_job(self, job_id: int, *, expect: Sequence[JobState], state: JobState,
                         next_at: int | None = None, reason: str = "", answer: Answer | None = None) -> bool:
        """Move a job in one of ``expect`` to ``state`` (and ``next_at``, ``reason``; making an
        inactive job active clears its failures), storing ``answer`` in the same transaction;
        False, and nothing changed, when the job is not in one of ``expect``."""
        ...


class OccurrenceStore(Protocol):
    """Occurrences: what is due, claimed before it runs, closed once."""

    async def next_due(self) -> int | None:
        """The earliest ``next_at`` of the active jobs."""
        ...

    async def due(self, until: int, limit: int) -> list[Job]:
        """Active jobs with ``next_at <= until``, earliest first, at most ``limit``."""
        ...

    async def claim(self, claims: Sequence[Claim]) -> list[bool]:
        """Claim occurrences in one transaction: for each, the job must be active with
        ``next_at == at`` and the occurrence new; then the job moves to ``claim.next_at`` (done
        when None) and the occurrence is recorded (with its answer, closed, for a reminder).
        Whether each was claimed: a second claimer of the same occurrence gets False."""
        ...

    async def close_occurrence(self, closing: Closing, answer: Answer | None = None) -> int | None:
        """Close a running occurrence, storing ``answer`` in the same transaction (a failure adds
        one to the job's failures in a row; completed, silent and skipped reset them); the job's
        failures in a row, or None, and nothing stored, when the occurrence was not running
        (closed already, by its turn for instance)."""
        ...

    async def unclosed(self) -> list[Occurrence]:
        """Occurrences claimed and never closed, oldest first (after a crash)."""
        ...


class ZoneStore(Protocol):
    async def zone(self, person: str) -> str | None:
        """The IANA time zone ``person`` chose with /tz, if any."""
        ...

    async def set_zone(self, person: str, zone: str | None) -> None:
        """Remember (None: forget) ``person``'s time zone."""
        ...


class ScheduleStore(JobStore, OccurrenceStore, ZoneStore, Protocol):
    """What ``bot.schedules`` needs of the store: jobs, their occurrences, people's zones."""
