"""The scheduler: one task that sleeps until the next due instant, claims each occurrence, and
hands it on; never lost, never doubled.

It reads the earliest ``next_at`` of the active jobs and sleeps until then (at most
``MAX_NAP``, so a machine that slept or a clock that jumped is noticed), woken early when a
job is added or resumed. Then it takes the due jobs, asks again whether each person the job
acts for (its creator, and everyone else whose message was in the turn that made it) may
still use the bot in that chat (a job of someone removed is paused, with the reason), and
claims each occurrence, keyed by (job, instant), in one transaction that also moves the job
to its next occurrence. A reminder's answer is stored in that very transaction and then
delivered through the durable delivery ledger: a crash at any moment either leaves the
occurrence unclaimed (run again at start) or its answer owed (delivered once at start). A
task becomes a turn of the turn runner with the least rights of its people, decided again at
every run (an owner only when all of them are owners now; each one's limits and budgets; the
tool policy, approvals and MCP grants as for the most restricted), and its prompt; its
turn closes the occurrence in the turn's own transaction, so an occurrence that was claimed
but never closed is a task the process died in, run again at start.

Missed while down: at start, an occurrence less than ``grace`` late runs at once, marked
"late by N min"; an older one-shot is not run, and its creator gets one message listing
what was missed; a recurring job runs at most one catch-up occurrence (its latest, when that
is within the grace), then goes on by its rule. After ``MAX_FAILURES`` failed runs in a row a
task is paused and its creator told once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from bot import observe
from bot.conversation import ChannelInfo, Conversation
from bot.limits import Refusal
from bot.messages import Answer, ChatType, Purpose
from bot.observe import Signal
from bot.runs import TaskOrder
from bot.schedules import rules
from bot.schedules.checks import CheckResult, Checks, CommandCheck, parse_check
from bot.schedules.jobs import Claim, Closing, Job, JobKind, JobState, RuleKind, ScheduleStore
from bot.schedules.service import ScheduleSettings
from bot.schedules.store import Closes
from bot.tasks import OwnedTasks
from bot.tools.base import Gate, ToolContext

log = logging.getLogger(__name__)

MAX_NAP = 300.0  # seconds: the longest sleep
RETRY_NAP = 5.0  # after the store failed
BATCH = 500  # occurrences claimed in one transaction
LATE_AFTER = 60  # seconds late before an occurrence says so
MAX_FAILURES = 3  # failed runs in a row that pause a task
NO_ACCESS = "its creator may no longer use the bot in this chat"

Sleep = Callable[[float], Awaitable[None]]


class Runner(Protocol):
    """The turn runner as the scheduler uses it (``bot.turns.Turns``)."""

    async def run_task(self, conversation: Conversation, task: str, order: TaskOrder) -> str: ...


class Owes(Protocol):
    """The outbox as the scheduler uses it (``bot.outbound.outbox.Outbox``): a message owed to a
    conversation, rendered, stored by the scheduler with what owes it, then pushed."""

    def to(self, conversation: Conversation, answer_id: str, text: str) -> Answer: ...

    def push(self, answer: Answer) -> None: ...


class Gatekeeper(Protocol):
    """Access decided at run time (``bot.access.Access``)."""

    async def may_use(self, platform: str, chat_id: str, chat_type: ChatType, user_id: str) -> bool: ...

    def is_owner_of(self, platform: str, user_id: str) -> bool: ...


class Limiter(Protocol):
    """The person's rate and budgets (``bot.limits.PersonLimits``)."""

    async def check_all(self, people: Sequence[str]) -> Refusal | None: ...


@dataclass(frozen=True, slots=True)
class TaskTools:
    """What a task's check needs: the checks that run here, whether a creator may have one
    run (exec for them, without approval), the job's workspace, and the agent's id."""

    checks: Checks
    may_check: Callable[[Conversation, bool], bool]
    workspace: Callable[[Conversation], Awaitable[Path]]
    agent_id: str = "main"
    gate: Gate | None = None  # the one gate of every tool call (hooks, approvals): a check's call passes it too


@dataclass(slots=True)
class _Missed:
    """A missed occurrence for the one message its creator gets: the line, and the store step
    that records it (given the message when it is the first of its group)."""

    job: Job
    line: str
    step: Callable[[Answer | None], Awaitable[bool]]


class Scheduler:
    def __init__(self, store: ScheduleStore, runner: Runner, outbox: Owes, access: Gatekeeper,
                 settings: ScheduleSettings = ScheduleSettings(), *, platforms: Mapping[str, ChannelInfo],
                 limits: Limiter | None = None, tools: TaskTools | None = None,
                 spell: Callable[[str], Callable[[str], str]] = lambda platform: lambda name: f"/{name}",
                 person_of: Callable[[str, str], str | None] = lambda platform, user_id: None,
                 clock: Callable[[], float] = time.time, sleep: Sleep = asyncio.sleep) -> None:
        self._store = store
        self._runner = runner
        self._outbox = outbox
        self._access = access
        self._settings = settings
        self._platforms = platforms
        self._limits = limits
        self._tools = tools
        self._spell = spell
        self._person_of = person_of  # the linked person of (platform, user id): one budget on every platform
        self._clock = clock
        self._sleep = sleep
        self._woken = asyncio.Event()
        self._main: asyncio.Task[None] | None = None
        self._tasks = OwnedTasks()
        self.fired = 0  # occurrences handed on (reminders owed, tasks started), for tests and the bench

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Recover what a previous process left, then serve (in a task of its own)."""
        if self._main is None:
            self._main = asyncio.create_task(self._serve(), name="scheduler")

    def wake(self) -> None:
        """A job was added or changed: look at the next due instant again."""
        self._woken.set()

    async def aclose(self) -> None:
        """Stop: the loop, then the tasks waiting for their turns (their occurrences stay
        unclosed, run again at the next start)."""
        if self._main is not None:
            self._main.cancel()
            await asyncio.wait({self._main})
            self._main = None
        await self._tasks.stop()

    async def _serve(self) -> None:
        try:
            await self._recover()
        except Exception:
            log.exception("scheduler: recovering what the last process left failed; going on")
        while True:
            self._woken.clear()
            try:
                due = await self._store.next_due()
                now = self._clock()
                if due is not None and due <= now:
                    if not await self._fire(int(now)):
                        await self._nap(1.0)  # nothing could be claimed: never spin
                    continue
            except Exception:
                log.exception("scheduler: the store failed; trying again in %.0f s", RETRY_NAP)
                await self._nap(RETRY_NAP)
                continue
            await self._nap(MAX_NAP if due is None else min(MAX_NAP, due - now))

    async def _nap(self, seconds: float) -> None:
        if seconds <= 0:
            return
        nap = asyncio.ensure_future(self._sleep(seconds))
        woken = asyncio.ensure_future(self._woken.wait())
        try:
            await asyncio.wait((nap, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            nap.cancel()
            woken.cancel()

    # -- start-up ----------------------------------------------------------------------

    async def _recover(self) -> None:
        """Tasks the last process died in: run again when within the grace, else missed; jobs
        whose time passed while it was down: the same, in one message per person and chat."""
        now = int(self._clock())
        missed = await self._unclosed(now)
        overdue = [self._with_channel(j) for j in await self._store.due(int(now - self._settings.grace) - 1, BATCH)]
        missed += await self._triage(overdue, now)
        await self._report(missed)

    async def adopt(self) -> None:
        """Several instances, after every sweep of the cluster's: take over the tasks an instance
        died running (the store hands each to one instance), and look at the next due instant
        again, so that a job another instance added (and would have run) is seen within a beat."""
        await self._report(await self._unclosed(int(self._clock())))
        self.wake()

    async def _unclosed(self, now: int) -> list[_Missed]:
        """Occurrences claimed and never closed: run again within the grace, else missed."""
        missed: list[_Missed] = []
        for left in await self._store.unclosed():
            job = self._with_channel(left.job)
            if job.state not in (JobState.ACTIVE, JobState.DONE) or job.conversation.platform not in self._platforms:
                await self._store.close_occurrence(Closing(job.id, left.at, "stopped"))
                continue
            if now - left.at <= self._settings.grace:
                log.info("scheduler: task %d of %d was cut short; running it again", job.id, left.at)
                self._tasks.spawn(self._task(job, left.at, now - left.at), f"task {job.id}")
                continue
            missed.append(_Missed(job, self._missed_line(job, left.at, None),
                                  partial(self._closed, Closing(job.id, left.at, "missed"))))
        return missed

    async def _closed(self, closing: Closing, answer: Answer | None) -> bool:
        return await self._store.close_occurrence(closing, answer) is not None

    # -- firing ------------------------------------------------------------------------

    async def _fire(self, now: int) -> bool:
        """Claim and hand on the occurrences due by ``now``; False when none could be claimed."""
        jobs = [self._with_channel(j) for j in await self._store.due(now, BATCH)]
        grace = self._settings.grace
        overdue = [j for j in jobs if j.next_at is not None and now - j.next_at > grace]
        if overdue:  # the process was asleep (suspended, blocked): as at start
            await self._report(await self._triage(overdue, now))
        late = {j.id for j in overdue}
        ready = []
        allowed: dict[tuple[str, str, str], bool] = {}
        for job in jobs:
            if job.id in late:
                continue
            c = job.conversation
            if c.platform not in self._platforms:
                await self._pause(job, f"{c.platform} is not enabled")
                continue
            for user in job.people:  # every person it acts for may still use the bot here
                who = (c.platform, c.chat_id, user)
                if who not in allowed:
                    allowed[who] = await self._access.may_use(c.platform, c.chat_id, c.chat_type, user)
                if not allowed[who]:
                    break
            else:
                ready.append(job)
                continue
            await self._pause(job, NO_ACCESS)
        claims = [self._claim(job, now) for job in ready]
        won = await self._store.claim(claims) if claims else []
        for job, claim, ok in zip(ready, claims, won, strict=True):
            if not ok:
                log.info("scheduler: occurrence %d of job %d was claimed elsewhere", claim.at, job.id)
                continue
            self.fired += 1
            observe.signal(Signal.SCHEDULE_LAG, platform=job.conversation.platform, value=claim.late)
            if claim.answer is not None:
                log.info("scheduler: reminder %d of %d owed%s session=%s", job.id, claim.at,
                         f" (late by {claim.late} s)" if claim.late else "", job.conversation.session_key)
                self._outbox.push(claim.answer)
            else:
                self._tasks.spawn(self._task(job, claim.at, claim.late), f"task {job.id}")
        return any(won) or bool(overdue) or len(ready) < len(jobs)

    def _claim(self, job: Job, now: int) -> Claim:
        assert job.next_at is not None
        at = job.next_at
        late = max(0, now - at)
        nxt = rules.next_after(job.when, max(at, now))  # at most one catch-up
        answer = None
        if job.kind is JobKind.REMINDER:
            answer = self._outbox.to(job.conversation, f"job-{job.id}-{at}", _reminder(job, late))
            answer = replace(answer, target=replace(answer.target, purpose=Purpose.REMINDER))  # stored with it
        return Claim(job.id, at, nxt, late, answer)

    async def _pause(self, job: Job, reason: str) -> None:
        if await self._store.update_job(job.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED,
                                        next_at=job.next_at, reason=reason):
            log.warning("scheduler: job %d paused: %s session=%s", job.id, reason, job.conversation.session_key)

    # -- tasks -------------------------------------------------------------------------

    async def _task(self, job: Job, at: int, late: int) -> None:
        """Run one claimed occurrence of a task and close it."""
        c = job.conversation
        owner = self._owner(job)
        payers = self._payers(job)
        outcome, output, notice = "failed", "", None
        try:
            refusal = None if owner or self._limits is None else await self._limits.check_all(payers)
            if refusal is not None:
                log.info("scheduler: task %d over its creator's %s limit session=%s", job.id, refusal.reason,
                         c.session_key)
                outcome = "limited"
                if refusal.text:
                    notice = f"Your scheduled task {job.id} did not run: {refusal.text}"
            else:
                checked = await self._check(job, at, owner) if job.check else CheckResult(True)
                if checked.error:
                    log.warning("scheduler: the check of task %d failed: %s session=%s", job.id, checked.error,
                                c.session_key)
                    outcome = "failed"
                elif not checked.go:
                    outcome = "skipped"
                else:
                    output = checked.output
                    order = TaskOrder(user_id=job.creator, users=job.people, owner=owner, payers=payers,
                                      prompt_mode="minimal" if job.prompt == "minimal" else "full",
                                      commits=Closes(job.id, at))
                    outcome = await self._runner.run_task(c, _task_text(job, at, late, output), order)
        except Exception:
            log.exception("scheduler: task %d of %d failed session=%s", job.id, at, c.session_key)
            outcome = "failed"
        answer = self._outbox.to(c, f"job-{job.id}-{at}-limit", notice) if notice else None
        failures = await self._store.close_occurrence(Closing(job.id, at, outcome), answer)
        if failures is None:  # its turn closed it
            current = await self._store.job(job.id)
            failures = current.failures if current is not None else 0
        elif answer is not None:
            self._outbox.push(answer)
        log.info("scheduler: task %d of %d %s session=%s", job.id, at, outcome, c.session_key)
        if failures >= MAX_FAILURES and job.recurring:
            await self._pause_failing(job, at, failures)

    async def _check(self, job: Job, at: int, owner: bool) -> CheckResult:
        assert job.check is not None
        tools = self._tools
        try:
            check = parse_check(job.check)
        except ValueError as exc:
            return CheckResult(False, error=str(exc))
        if tools is None or not tools.checks.runs(check):
            return CheckResult(False, error="checks of this kind do not run here (is tools.exec enabled?)")
        if isinstance(check, CommandCheck) and not tools.may_check(job.conversation, owner):
            return CheckResult(False, error="its creator may no longer have commands run")
        workspace = await tools.workspace(job.conversation)
        ctx = ToolContext(workspace, job.conversation, f"check-{job.id}-{at}", tools.agent_id, job.creator, owner,
                          payers=self._payers(job), gate=tools.gate, users=job.people, unattended=True)
        return await tools.checks.run(ctx, check)

    def _owner(self, job: Job) -> bool:
        """Whether a job runs as an owner: only when everyone it was asked for is one, now."""
        return all(self._access.is_owner_of(job.conversation.platform, user) for user in job.people)

    def _payers(self, job: Job) -> tuple[str, ...]:
        """Whom a job's run counts against and is charged to: each of its people (``limit_keys``)."""
        platform = job.conversation.platform
        others = tuple(f"person:{p}" if (p := self._person_of(platform, u)) else f"{platform}:{u}" for u in job.others)
        return tuple(dict.fromkeys((*others, job.person)))

    async def _pause_failing(self, job: Job, at: int, failures: int) -> None:
        spell = self._spell(job.conversation.platform)
        text = (f"I paused your scheduled task {job.id} ({_short(job.text)}) after {failures} failed runs in a "
                f"row. {spell('tasks')} resume {job.id} starts it again.")
        answer = self._outbox.to(job.conversation, f"job-{job.id}-{at}-paused", text)
        current = await self._store.job(job.id)
        if await self._store.update_job(job.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED,
                                        next_at=current.next_at if current else None,
                                        reason=f"{failures} failed runs in a row", answer=answer):
            log.warning("scheduler: task %d paused after %d failed runs session=%s", job.id, failures,
                        job.conversation.session_key)
            self._outbox.push(answer)

    # -- missed ------------------------------------------------------------------------

    async def _triage(self, overdue: list[Job], now: int) -> list[_Missed]:
        """Jobs due more than the grace ago: a recurring one catches up once when its latest
        occurrence is within the grace (the loop runs it, late), else moves on by its rule; a
        one-shot is missed. The missed ones, for ``_report``."""
        missed: list[_Missed] = []
        for job in overdue:
            assert job.next_at is not None
            if job.when.kind is RuleKind.AT:
                missed.append(_Missed(job, self._missed_line(job, job.next_at, None),
                                      partial(self._moved, job, JobState.MISSED, None)))
                continue
            latest = rules.latest_until(job.when, now)
            if latest is not None and now - latest <= self._settings.grace:
                log.info("scheduler: job %d catches up its occurrence of %d", job.id, latest)
                await self._store.update_job(job.id, expect=(JobState.ACTIVE,), state=JobState.ACTIVE, next_at=latest)
                continue
            nxt = rules.next_after(job.when, now)
            missed.append(_Missed(job, self._missed_line(job, job.next_at, nxt),
                                  partial(self._moved, job, JobState.ACTIVE, nxt)))
        return missed

    async def _moved(self, job: Job, state: JobState, next_at: int | None, answer: Answer | None) -> bool:
        reason = "missed while the bot was down" if state is JobState.MISSED else ""
        return await self._store.update_job(job.id, expect=(JobState.ACTIVE,), state=state, next_at=next_at,
                                            reason=reason, answer=answer)

    async def _report(self, missed: list[_Missed]) -> None:
        """Record each missed occurrence; each person gets one message per chat listing theirs,
        stored with the first record of the group (so it is owed once, whatever happens) and sent
        once the whole group is recorded (what it lists is then what the jobs say)."""
        groups: dict[tuple[str, str, str | None, str], list[_Missed]] = {}
        for m in missed:
            c = m.job.conversation
            groups.setdefault((c.platform, c.chat_id, c.thread_id, m.job.person), []).append(m)
        for entries in groups.values():
            first = entries[0].job
            text = "While I was offline, these were due and did not run:\n" + "\n".join(f"- {m.line}" for m in entries)
            answer: Answer | None = self._outbox.to(first.conversation,
                                                        f"missed-{first.id}-{first.next_at}", text)
            owed: Answer | None = None
            for m in entries:
                if await m.step(answer) and answer is not None:
                    owed, answer = answer, None
            if owed is not None:
                self._outbox.push(owed)
            log.info("scheduler: %d missed occurrences reported session=%s", len(entries),
                     first.conversation.session_key)

    def _missed_line(self, job: Job, at: int, nxt: int | None) -> str:
        tz = rules.shown_zone(job.when.zone)
        rule = "" if job.when.kind is RuleKind.AT else f" ({rules.describe(job.when)})"
        line = f"{job.kind} {job.id}{rule}, due {rules.local(at, tz)}: {_short(job.text)}"
        return line + (f"; next {rules.local(nxt, tz)}" if nxt is not None else "")

    def _with_channel(self, job: Job) -> Job:
        info = self._platforms.get(job.conversation.platform)
        return replace(job, conversation=replace(job.conversation, channel=info)) if info is not None else job


def _minutes(seconds: int) -> int:
    return max(1, round(seconds / 60))


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _reminder(job: Job, late: int) -> str:
    """What a reminder says: its text; for whom in a group; how late, when it is."""
    who = f" for {job.creator_name}" if job.conversation.is_group and job.creator_name else ""
    lateness = f" (late by {_minutes(late)} min)" if late >= LATE_AFTER else ""
    return f"⏰ Reminder{who}{lateness}: {job.text}"


def _task_text(job: Job, at: int, late: int, output: str) -> str:
    """The input of a task's turn: what it is and when it was due, its text, its check's output."""
    tz = rules.shown_zone(job.when.zone)
    rule = "once" if job.when.kind is RuleKind.AT else rules.describe(job.when)
    by = f", set by {job.creator_name}" if job.creator_name else ""
    lateness = f", late by {_minutes(late)} min (I was offline)" if late >= LATE_AFTER else ""
    head = (f"[Scheduled task {job.id} ({rule}){by}, due {rules.local(at, tz)}{lateness}. Do it now: your "
            "answer goes to this chat. If there is nothing worth telling, answer exactly NO_REPLY.]")
    body = f"{head}\n{job.text}"
    if output:
        body += f"\n\nOutput of its check:\n```\n{output}\n```"
    return body
