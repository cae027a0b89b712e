"""Making, listing and changing jobs: what the ``schedule`` tool and the commands share.

``Schedules`` checks a job before it is stored (a time to come, the person's cap of jobs,
the minimum interval of a recurring job), resolves times in the person's zone (the one they
set with ``/tz``, else ``schedules.default_timezone``, else the machine's), wakes the
scheduler when a job is added or resumed, and writes jobs as people read them: the id in
plain text and the next run in their zone. People act only on their own jobs in the chat at
hand; the owners' ``chatgate schedules`` reaches every job.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from bot.conversation import Conversation
from bot.errors import ChatgateError
from bot.schedules import rules
from bot.schedules.checks import Check, parse_check
from bot.schedules.jobs import Job, JobKind, JobState, RuleKind, ScheduleStore, When

MAX_TEXT = 4000
Action = Literal["cancel", "pause", "resume"]


class ScheduleError(ChatgateError):
    """A job that cannot be made or changed: the message is the sentence for the person."""


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    default_timezone: str | None = None  # None: the machine's
    grace: float = 3600.0  # seconds
    max_per_person: int = 20
    min_interval: float = 300.0  # seconds between occurrences of a recurring job
    check_timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class Creator:
    """Who makes or changes jobs, and where: the conversation, and the person in it."""

    conversation: Conversation
    user_id: str
    name: str = ""
    others: tuple[str, ...] = ()  # the other people of the turn that asks (user ids): the job acts for them too

    @property
    def person(self) -> str:
        """Whom their jobs count against (as ``Job.person``)."""
        c = self.conversation
        return f"person:{c.person}" if c.person else f"{c.platform}:{self.user_id}"


class Schedules:
    def __init__(self, store: ScheduleStore, settings: ScheduleSettings = ScheduleSettings(), *,
                 wake: Callable[[], None] = lambda: None, clock: Callable[[], float] = time.time,
                 reach: Callable[[Job], Awaitable[str]] | None = None) -> None:
        self.store = store
        self.settings = settings
        self._wake = wake
        self._reach = reach  # "" or why the job's messages may not reach the person (a channel that is ``Windowed``)
        self._clock = clock
        self._machine = rules.machine_zone()

    def now(self) -> float:
        return self._clock()

    # -- zones -------------------------------------------------------------------------

    async def zone_of(self, person: str) -> tuple[str, str]:
        """(the IANA zone ``person``'s times are in, where it comes from: yours | default | this machine's)."""
        own = await self.store.zone(person)
        if own is not None:
            return own, "yours"
        if self.settings.default_timezone:
            return self.settings.default_timezone, "default"
        return self._machine, "this machine's"

    async def set_zone(self, person: str, name: str | None) -> str | None:
        """Remember ``person``'s zone (None: forget it); the zone as the database spells it."""
        if name is None:
            await self.store.set_zone(person, None)
            return None
        try:
            canonical = rules.canonical_zone(name.strip())
        except ValueError as exc:
            raise ScheduleError(str(exc)) from None
        await self.store.set_zone(person, canonical)
        return canonical

    # -- making ------------------------------------------------------------------------

    async def when(self, person: str, *, at: str | None = None, after: str | None = None, every: str | None = None,
                   cron: str | None = None, start: str | None = None, zone: str | None = None) -> When:
        """A rule from the typed fields the tool takes (exactly one of ``at``, ``after``, ``every``,
        ``cron``), in ``zone`` or else the person's."""
        given = [name for name, value in (("at", at), ("in", after), ("every", every), ("cron", cron)) if value]
        if len(given) != 1:
            raise ScheduleError("give exactly one of at, in, every or cron" +
                                (f" (got {', '.join(given)})" if given else ""))
        try:
            name = rules.canonical_zone(zone) if zone else (await self.zone_of(person))[0]
            tz = rules.zone(name)
            now = self._clock()
            if at:
                return When(RuleKind.AT, name, rules.parse_instant(at, tz))
            if after:
                return When(RuleKind.AT, name, math.ceil(now) + rules.parse_duration(after))
            if every:
                interval = rules.parse_duration(every)
                anchor = rules.parse_instant(start, tz) if start else math.ceil(now) + interval
                return When(RuleKind.EVERY, name, anchor, interval)
            assert cron is not None
            return When(RuleKind.CRON, name, math.ceil(now), cron=rules.check_cron(cron))
        except ValueError as exc:
            raise ScheduleError(str(exc)) from None

    async def create(self, creator: Creator, kind: JobKind, text: str, when: When, *, prompt: str = "full",
                     check: Check | None = None) -> Job:
        """Check and store a new job; the scheduler is woken for it."""
        text = text.strip()
        if not text:
            raise ScheduleError("say what the " + ("reminder should say" if kind is JobKind.REMINDER
                                                   else "task should do"))
        if len(text) > MAX_TEXT:
            raise ScheduleError(f"that is {len(text):,} characters; keep it under {MAX_TEXT:,}")
        now = int(self._clock())
        try:
            first = rules.first_run(when, now)
        except ValueError as exc:
            raise ScheduleError(str(exc)) from None
        if first is None:
            raise ScheduleError(f"{rules.local(when.anchor, rules.zone(when.zone))} has passed already")
        gap = rules.smallest_gap(when, now)
        if gap is not None and gap < self.settings.min_interval:
            every = rules.duration_text(int(self.settings.min_interval))
            raise ScheduleError(f"a recurring job runs at most every {every}; {rules.describe(when)} is more often")
        job = Job(0, kind, text, when, creator.conversation, creator.user_id, creator.name, next_at=first,
                  prompt=prompt, check=check.json() if check is not None else None, created_at=self._clock(),
                  others=creator.others)
        stored = await self.store.add_job(job, max_per_person=self.settings.max_per_person)
        if stored is None:
            raise ScheduleError(f"you have {self.settings.max_per_person} jobs already (the most one person may "
                                "have); cancel one first")
        self._wake()
        return stored

    # -- listing and changing ------------------------------------------------------------

    async def mine(self, creator: Creator) -> list[Job]:
        """The person's active and paused jobs in this chat."""
        c = creator.conversation
        return [job for job in await self.store.jobs(person=creator.person, platform=c.platform, chat_id=c.chat_id)
                if job.conversation.thread_id == c.thread_id or not c.thread_id]

    async def change(self, creator: Creator, job_id: int, action: Action) -> Job:
        """Cancel, pause or resume one of the person's jobs in this chat; the job as it is now."""
        job = next((j for j in await self.mine(creator) if j.id == job_id), None)
        if job is None:
            raise ScheduleError(f"you have no job {job_id} here; /tasks lists yours")
        if action == "cancel":
            done = await self.store.update_job(job.id, expect=(JobState.ACTIVE, JobState.PAUSED),
                                               state=JobState.CANCELLED)
        elif action == "pause":
            if job.state is JobState.PAUSED:
                raise ScheduleError(f"job {job.id} is paused already")
            done = await self.store.update_job(job.id, expect=(JobState.ACTIVE,), state=JobState.PAUSED,
                                               next_at=job.next_at, reason="paused by its creator")
        else:
            if job.state is JobState.ACTIVE:
                raise ScheduleError(f"job {job.id} is running already")
            nxt = rules.next_after(job.when, int(self._clock()))
            if nxt is None:
                due = rules.local(job.when.anchor, rules.shown_zone(job.when.zone))
                raise ScheduleError(f"job {job.id} was due {due}, which has passed; make a new one")
            done = await self.store.update_job(job.id, expect=(JobState.PAUSED,), state=JobState.ACTIVE, next_at=nxt)
            self._wake()
        if not done:
            raise ScheduleError(f"job {job.id} changed meanwhile; /tasks shows it as it is")
        changed = await self.store.job(job.id)
        assert changed is not None
        return changed

    async def reach(self, job: Job) -> str:
        """Why the job's messages may not reach its person ("" when they will): its channel is ``Windowed``."""
        return await self._reach(job) if self._reach is not None else ""

    async def line(self, job: Job, zone: str) -> str:
        """One job as its creator reads it: id, kind, next run in their zone, rule, text, state."""
        tz = rules.shown_zone(zone)
        if job.state is JobState.ACTIVE and job.next_at is not None:
            when = f"next {rules.local(job.next_at, tz)}"
        elif job.state is JobState.PAUSED:
            when = "paused" + (f" ({job.reason})" if job.reason and job.reason != "paused by its creator" else "")
        else:
            when = str(job.state)
        rule = "" if job.when.kind is RuleKind.AT else f", {rules.describe(job.when)}"
        extra = ""
        if job.check:
            try:
                extra = f", {parse_check(job.check).describe()}"
            except ValueError:
                extra = ", an unknown check"
        text = " ".join(job.text.split())
        if len(text) > 80:
            text = text[:79] + "…"
        warning = await self.reach(job) if job.state is JobState.ACTIVE else ""
        return f"{job.id} · {job.kind}{rule}{extra} · {when} · {text}" + (f" · ⚠ {warning}" if warning else "")
