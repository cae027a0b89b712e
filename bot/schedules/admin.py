"""``chatgate schedules``: the owners' view of every job (who made it, where, its next run,
why it is paused) and cancelling any of them, from the store, beside a running bot or not.

A running bot sees a cancelled job at its next look at the store: its claim requires an
active job, so a cancelled one never runs again.
"""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager
from datetime import UTC

from bot.schedules import rules
from bot.schedules.jobs import Job, JobState
from bot.schedules.store import StoredSchedules
from bot.store.schema_steps import StepStore
from bot.tracing import strip_controls as clean  # texts and names come from chat users

OPEN = (JobState.ACTIVE, JobState.PAUSED)


async def schedules_command(opened: AbstractAsyncContextManager[StepStore], action: str, job_id: int | None, *,
                            everything: bool = False) -> int:
    """List (``action`` "list") or cancel one job in the store ``opened`` opens; the exit code."""
    async with opened as db:
        store = StoredSchedules(db)
        if action == "list":
            jobs = await store.jobs(states=tuple(JobState) if everything else OPEN)
            print("\n".join(line(job) for job in jobs) if jobs else "no jobs")
            return 0
        assert job_id is not None
        job = await store.job(job_id)
        if job is None or job.state not in OPEN:
            print(f"chatgate: no active or paused job {job_id}; see `chatgate schedules list`", file=sys.stderr)
            return 1
        if not await store.update_job(job_id, expect=OPEN, state=JobState.CANCELLED, reason="cancelled by an owner"):
            print(f"chatgate: job {job_id} changed meanwhile; try again", file=sys.stderr)
            return 1
        print(f"cancelled {line(job)}")
        return 0


def line(job: Job) -> str:
    """One job for an owner: id, kind, state (and why), next run in UTC and in its zone, rule,
    chat, creator, text."""
    c = job.conversation
    state = str(job.state) + (f" ({clean(job.reason)})" if job.reason else "")
    if job.next_at is not None and job.state is JobState.ACTIVE:
        utc = rules.local(job.next_at, UTC, "%Y-%m-%d %H:%M UTC")
        state += f", next {utc} = {rules.local(job.next_at, rules.shown_zone(job.when.zone))}"
    chat = f"{c.platform}:{clean(c.chat_id)}" + (f"/{clean(c.thread_id)}" if c.thread_id else "")
    who = clean(job.creator) + (f" ({clean(job.creator_name)})" if job.creator_name else "")
    text = " ".join(clean(job.text).split())
    text = text if len(text) <= 60 else text[:59] + "…"
    check = ", with a check" if job.check else ""
    return f"{job.id}  {job.kind}{check}  {state}  {rules.describe(job.when)}  {chat} by {who}  {text}"
