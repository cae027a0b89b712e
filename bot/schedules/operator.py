"""Everyone's jobs as an operator sees them (the dashboard's Operations page, ``chatgate schedules``).

A creator changes their own jobs through ``Schedules.change`` (``/tasks``); an operator may
pause, resume or cancel any job. The rows are plain values the dashboard reads by name
(``bot.dashboard.sources.Job``): the schedules package knows nothing of the dashboard.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot.schedules import rules
from bot.schedules.jobs import Job, JobState, RuleKind, ScheduleStore


@dataclass(frozen=True, slots=True)
class JobRow:
    id: str
    kind: str  # reminder | task
    rule: str  # the rule in words, with its zone
    session_key: str
    next_at: float | None
    paused: bool
    text: str
    warning: str = ""  # why its messages may not reach the person (WhatsApp's 24 hours), as /tasks says with ⚠


async def _unknown(job: Job) -> str:
    return ""


async def row(job: Job, reach: Callable[[Job], Awaitable[str]] = _unknown) -> JobRow:
    """``reach``: "" or why the job's messages may not reach its person (``Schedules.reach``), asked
    of an active job only, as ``/tasks`` does."""
    rule = (f"at {rules.local(job.when.anchor, rules.shown_zone(job.when.zone))}" if job.when.kind is RuleKind.AT
            else rules.describe(job.when))
    paused = job.state is JobState.PAUSED
    return JobRow(str(job.id), str(job.kind), f"{rule} ({job.when.zone})", job.conversation.session_key,
                  float(job.next_at) if job.next_at is not None else None, paused, job.text,
                  "" if paused else await reach(job))


class OperatorJobs:
    """Every active and paused job, and the operator's three changes to one."""

    def __init__(self, store: ScheduleStore, clock: Callable[[], float], wake: Callable[[], None],
                 reach: Callable[[Job], Awaitable[str]] = _unknown) -> None:
        self._store, self._clock, self._wake, self._reach = store, clock, wake, reach

    async def jobs(self) -> Sequence[JobRow]:
        return [await row(job, self._reach) for job in await self._store.jobs()]

    async def set_paused(self, job_id: str, paused: bool) -> bool:
        job = await self._store.job(int(job_id)) if job_id.isdigit() else None
        if job is None:
            return False
        if paused:
            return await self._store.update_job(job.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED,
                                                next_at=job.next_at, reason="paused by an operator")
        nxt = rules.next_after(job.when, int(self._clock()))
        if nxt is None:
            return False
        done = await self._store.update_job(job.id, expect=(JobState.PAUSED,), state=JobState.ACTIVE, next_at=nxt)
        if done:
            self._wake()
        return done

    async def cancel_job(self, job_id: str) -> bool:
        if not job_id.isdigit():
            return False
        return await self._store.update_job(int(job_id), expect=(JobState.ACTIVE, JobState.PAUSED),
                                            state=JobState.CANCELLED)
