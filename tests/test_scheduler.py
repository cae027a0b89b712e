"""The scheduler (issue 23) on a controllable clock, against the real SQLite store and a
recording turn runner: it sleeps until the next due instant and wakes when a job is added;
occurrences are claimed once across restarts; missed while down (late by, the missed list,
one catch-up); a removed person's job paused; limits; a check skipping the model; three
failures pause."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.conversation import ChannelInfo, Conversation
from bot.limits import Refusal
from bot.messages import Answer, ChatType, Chunk, Target
from bot.runs import TaskOrder
from bot.schedules.checks import CheckResult, Checks, CommandCheck, checks_for
from bot.schedules.jobs import Claim, JobKind, JobState, RuleKind, When
from bot.schedules.scheduler import MAX_NAP, Scheduler, TaskTools
from bot.schedules.service import Creator, ScheduleError, Schedules, ScheduleSettings
from bot.schedules.store import Closes, StoredSchedules
from bot.store.sqlite import SQLiteStore
from bot.tools.sandbox import ExecSettings

T0 = 1_750_000_000  # a Sunday, 15:06:40 UTC
DM = Conversation.of_key("agent:main:telegram:dm:42", account="bot")
GROUP = Conversation.of_key("agent:main:telegram:group:-100", account="bot")
ADA = Creator(DM, "42", "Ada")


class Clock:
    """Time that moves only when the test says: ``sleep`` waits until ``advance`` passes its end."""

    def __init__(self, now: float) -> None:
        self.now = now
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self.naps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), future))
        await future

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        await settle()


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)
    await asyncio.sleep(0.02)


@dataclass
class Runner:
    """The turn runner as the scheduler sees it, recording; a task's outcome is scripted, and a
    completed task closes its occurrence through a turn, as ``Turns`` does (its order's ``commits``)."""

    db: SQLiteStore
    pushed: list[Answer] = field(default_factory=list)
    tasks: list[tuple[str, TaskOrder]] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)

    def to(self, conversation: Conversation, answer_id: str, text: str) -> Answer:
        return Answer(answer_id, conversation.platform, Target(conversation.chat_id, conversation.chat_type),
                      (Chunk(text),))

    def push(self, answer: Answer) -> None:
        self.pushed.append(answer)

    async def run_task(self, conversation: Conversation, task: str, order: TaskOrder) -> str:
        self.tasks.append((task, order))
        outcome = self.outcomes.pop(0) if self.outcomes else "completed"
        if outcome in ("completed", "silent", "failed") and order.commits is not None:  # its turn closes it
            await self.db.write(order.commits(outcome, time.time()))
        return outcome

    def texts(self) -> list[str]:
        return [a.chunks[0].text for a in self.pushed]


@dataclass
class Gate:
    removed: set[str] = field(default_factory=set)
    owners: set[str] = field(default_factory=set)

    async def may_use(self, platform: str, chat_id: str, chat_type: ChatType, user_id: str) -> bool:
        return user_id not in self.removed

    def is_owner_of(self, platform: str, user_id: str) -> bool:
        return user_id in self.owners


@dataclass
class Limits:
    refusal: Refusal | None = None
    asked: list[tuple[str, ...]] = field(default_factory=list)

    async def check_all(self, people: Sequence[str]) -> Refusal | None:
        self.asked.append(tuple(people))
        return self.refusal


class World:
    def __init__(self, store: SQLiteStore, clock: Clock, tmp: Path) -> None:
        self.db, self.store, self.clock, self.tmp = store, StoredSchedules(store), clock, tmp
        self.runner = Runner(store)
        self.gate = Gate()
        self.limits = Limits()
        self.settings = ScheduleSettings(default_timezone="Europe/Berlin", grace=3600, min_interval=300)
        self.checks: Checks = Checks()
        self.scheduler: Scheduler | None = None
        self.schedules = Schedules(self.store, self.settings, wake=self.wake, clock=clock)

    def wake(self) -> None:
        if self.scheduler is not None:
            self.scheduler.wake()

    async def start(self) -> Scheduler:
        async def workspace(conversation: Conversation) -> Path:
            path = self.tmp / "ws"
            path.mkdir(exist_ok=True)
            return path

        self.scheduler = Scheduler(self.store, self.runner, self.runner, self.gate, self.settings,
                                   platforms={"telegram": ChannelInfo("telegram")}, limits=self.limits,
                                   tools=TaskTools(self.checks, lambda c, owner: True, workspace),
                                   clock=self.clock, sleep=self.clock.sleep)
        self.scheduler.start()
        await settle()
        return self.scheduler

    async def stop(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.aclose()
            self.scheduler = None

    async def remind(self, text: str, seconds: int, creator: Creator = ADA) -> int:
        when = When(RuleKind.AT, "Europe/Berlin", int(self.clock.now) + seconds)
        return (await self.schedules.create(creator, JobKind.REMINDER, text, when)).id

    async def task(self, text: str, when: When, **kw: object) -> int:
        return (await self.schedules.create(ADA, JobKind.TASK, text, when, **kw)).id  # type: ignore[arg-type]


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with SQLiteStore(tmp_path / "chatgate.db") as store:
        w = World(store, Clock(T0), tmp_path)
        try:
            yield w
        finally:
            await w.stop()


# -- sleeping, waking, claiming ---------------------------------------------------------------


async def test_a_reminder_is_sent_at_its_time_once(world: World) -> None:
    await world.start()
    job = await world.remind("stretch", 90)
    await settle()
    await world.clock.advance(89)
    assert world.runner.pushed == []
    await world.clock.advance(1)
    assert world.runner.texts() == ["⏰ Reminder: stretch"]
    assert world.runner.pushed[0].id == f"job-{job}-{T0 + 90}"
    done = await world.store.job(job)
    assert done is not None and done.state is JobState.DONE
    await world.stop()  # a restart finds nothing owed by the scheduler: the answer is the ledger's now
    await world.start()
    await world.clock.advance(3600)
    assert len(world.runner.pushed) == 1


async def test_it_sleeps_until_the_next_due_instant_and_wakes_for_a_new_job(world: World) -> None:
    await world.start()
    assert world.clock.naps == [MAX_NAP]  # nothing to do: one long sleep, no polling
    await world.remind("later", 200)
    await settle()
    assert world.clock.naps[-1] == 200  # woken by the new job, sleeps until it is due
    await world.remind("sooner", 30)
    await settle()
    assert world.clock.naps[-1] == 30
    await world.clock.advance(30)
    assert world.runner.texts() == ["⏰ Reminder: sooner"]
    reads = len(world.clock.naps)
    await world.clock.advance(170)
    assert world.runner.texts() == ["⏰ Reminder: sooner", "⏰ Reminder: later"]
    assert len(world.clock.naps) - reads <= 2


async def test_an_hour_idle_costs_a_dozen_wake_ups(world: World) -> None:
    await world.start()
    await world.remind("tomorrow", 86400)
    for _ in range(12):
        await world.clock.advance(MAX_NAP)
    assert len(world.clock.naps) <= 14 and world.runner.pushed == []


async def test_a_thousand_reminders_due_in_the_same_second_are_each_sent_once(world: World) -> None:
    await world.start()
    for i in range(1000):
        await world.remind(f"r{i}", 60, Creator(Conversation.of_key(f"agent:main:telegram:dm:{i}"), str(i)))
    await world.clock.advance(60)
    for _ in range(10):
        await settle()
    assert sorted(world.runner.texts()) == sorted(f"⏰ Reminder: r{i}" for i in range(1000))
    assert len({a.id for a in world.runner.pushed}) == 1000


async def test_a_recurring_job_moves_on_by_its_rule(world: World) -> None:
    await world.start()
    job = await world.task("summarise", When(RuleKind.EVERY, "Europe/Berlin", T0 + 600, 600))
    for _ in range(3):
        await world.clock.advance(600)
    assert len(world.runner.tasks) == 3
    task, order = world.runner.tasks[0]
    assert task.startswith(f"[Scheduled task {job} (every 10m)") and task.endswith("\nsummarise")
    assert "NO_REPLY" in task and "late by" not in task
    assert order.user_id == "42" and order.payers == ("telegram:42",) and order.commits == Closes(job, T0 + 600)
    assert world.limits.asked == [("telegram:42",)] * 3  # counts against its creator's rate and budget
    current = await world.store.job(job)
    assert current is not None and current.next_at == T0 + 2400 and current.failures == 0


# -- missed while down ------------------------------------------------------------------------


async def test_a_restart_within_the_grace_runs_it_late(world: World) -> None:
    await world.remind("call mum", 60)
    world.clock.now += 60 + 25 * 60  # down for 25 minutes past its time
    await world.start()
    await world.clock.advance(0)
    assert world.runner.texts() == ["⏰ Reminder (late by 25 min): call mum"]


async def test_a_restart_beyond_the_grace_lists_what_was_missed_once(world: World) -> None:
    first = await world.remind("call mum", 60)
    second = await world.remind("water plants", 120)
    elsewhere = await world.remind("in the group", 60, Creator(GROUP, "42", "Ada"))
    other = await world.remind("someone else's", 60, Creator(Conversation.of_key("agent:main:telegram:dm:7"), "7"))
    world.clock.now += 3 * 3600
    await world.start()
    texts = world.runner.texts()
    assert len(texts) == 3  # one message per person and chat
    mine = next(t for t in texts if "call mum" in t)
    assert mine.startswith("While I was offline, these were due and did not run:")
    assert f"reminder {first}" in mine and f"reminder {second}" in mine and "water plants" in mine
    assert "in the group" not in mine and any("in the group" in t for t in texts)
    for job in (first, second, elsewhere, other):
        missed = await world.store.job(job)
        assert missed is not None and missed.state is JobState.MISSED
    await world.stop()
    await world.start()
    await world.clock.advance(10)
    assert len(world.runner.pushed) == 3  # listed once, never again


async def test_a_recurring_job_catches_up_once_then_follows_its_rule(world: World) -> None:
    daily = When(RuleKind.CRON, "Europe/Berlin", T0, cron="0 * * * *")  # every hour, on the hour
    job = await world.task("hourly report", daily)
    world.clock.now += 5 * 3600 + 1200  # down for five hours: the last one was at 20:00 UTC, 26m40s ago
    await world.start()
    await settle()
    assert len(world.runner.tasks) == 1 and "late by 27 min" in world.runner.tasks[0][0]
    assert world.runner.pushed == []  # nothing listed: it caught up
    current = await world.store.job(job)
    assert current is not None and current.next_at is not None and current.next_at > world.clock.now
    await world.clock.advance(2000)  # 21:00 UTC, on its rule again
    assert len(world.runner.tasks) == 2 and "late by" not in world.runner.tasks[1][0]


async def test_a_recurring_job_missed_beyond_the_grace_is_listed_and_moves_on(world: World) -> None:
    job = await world.task("daily report", When(RuleKind.CRON, "Europe/Berlin", T0, cron="0 9 * * *"))
    world.clock.now += 2 * 86400
    await world.start()
    assert world.runner.tasks == []
    [listed] = world.runner.texts()
    assert f"task {job} (cron 0 9 * * * (Europe/Berlin))" in listed and "; next " in listed
    current = await world.store.job(job)
    assert current is not None and current.state is JobState.ACTIVE and (current.next_at or 0) > world.clock.now


async def test_a_task_the_process_died_in_runs_again_or_is_listed(world: World) -> None:
    soon = await world.task("soon", When(RuleKind.AT, "UTC", T0 + 60))
    world.runner.outcomes = ["hang"]

    async def hang(conversation: Conversation, task: str, order: TaskOrder) -> str:
        await asyncio.Event().wait()
        return "completed"

    world.runner.run_task = hang  # type: ignore[method-assign]
    await world.start()
    await world.clock.advance(60)
    await world.stop()  # the process goes while the task's turn runs: its occurrence stays unclosed
    assert [o.job.id for o in await world.store.unclosed()] == [soon]
    world.runner = Runner(world.db)
    world.clock.now += 600
    await world.start()
    assert len(world.runner.tasks) == 1 and "late by 10 min" in world.runner.tasks[0][0]
    assert await world.store.unclosed() == []


async def test_a_task_cut_short_beyond_the_grace_is_listed(world: World) -> None:
    job = await world.task("long ago", When(RuleKind.AT, "UTC", T0 + 60))
    await world.store.claim([Claim(job, T0 + 60, None)])
    world.clock.now += 3 * 3600
    await world.start()
    assert world.runner.tasks == [] and await world.store.unclosed() == []
    [listed] = world.runner.texts()
    assert f"task {job}, due " in listed and "long ago" in listed


# -- access, limits, checks, failures ---------------------------------------------------------


async def test_a_removed_persons_job_is_paused_with_the_reason(world: World) -> None:
    job = await world.remind("stretch", 60)
    world.gate.removed.add("42")
    await world.start()
    await world.clock.advance(60)
    assert world.runner.pushed == []
    paused = await world.store.job(job)
    assert paused is not None and paused.state is JobState.PAUSED
    assert paused.reason == "its creator may no longer use the bot in this chat"


async def test_a_task_over_its_creators_limit_is_not_run_and_they_are_told(world: World) -> None:
    world.limits.refusal = Refusal("You've used today's budget of $0.10; it renews at 00:00 UTC.", "cost")
    job = await world.task("expensive", When(RuleKind.AT, "UTC", T0 + 60))
    await world.start()
    await world.clock.advance(60)
    assert world.runner.tasks == []
    assert world.runner.texts() == [f"Your scheduled task {job} did not run: You've used today's budget of $0.10; "
                                    "it renews at 00:00 UTC."]


async def test_owners_tasks_are_not_limited(world: World) -> None:
    world.gate.owners.add("42")
    world.limits.refusal = Refusal("over", "rate")
    await world.task("anything", When(RuleKind.AT, "UTC", T0 + 60))
    await world.start()
    await world.clock.advance(60)
    assert len(world.runner.tasks) == 1 and world.limits.asked == [] and world.runner.tasks[0][1].owner


@pytest.mark.parametrize(("command", "ran", "output"), [
    ("true", False, None),  # no output: nothing to do
    ("echo failing; exit 1", False, None),  # exit 1: nothing to do
    ("echo 'build 41 failed'", True, "build 41 failed"),
])
async def test_a_check_skips_the_model_when_there_is_nothing_to_do(world: World, command: str, ran: bool,
                                                                   output: str | None) -> None:
    world.checks = checks_for(ExecSettings(sandbox="none"), 10.0)
    job = await world.task("tell me if the build failed", When(RuleKind.EVERY, "UTC", T0 + 600, 600),
                           check=CommandCheck(command))
    await world.start()
    await world.clock.advance(600)
    for _ in range(20):
        await settle()
        if world.runner.tasks or await world.store.unclosed() == []:
            break
    assert bool(world.runner.tasks) is ran
    if output is not None:
        assert world.runner.tasks[0][0].endswith(f"Output of its check:\n```\n{output}\n```")
    current = await world.store.job(job)
    assert current is not None and current.failures == 0


async def test_three_failed_runs_in_a_row_pause_a_task_and_tell_its_creator_once(world: World) -> None:
    world.runner.outcomes = ["failed", "completed", "failed", "failed", "failed"]
    job = await world.task("flaky", When(RuleKind.EVERY, "UTC", T0 + 600, 600))
    await world.start()
    for _ in range(7):
        await world.clock.advance(600)
    assert len(world.runner.tasks) == 5  # the fifth run is the third failure in a row: no sixth
    paused = await world.store.job(job)
    assert paused is not None and paused.state is JobState.PAUSED and paused.reason == "3 failed runs in a row"
    assert world.runner.texts() == [f"I paused your scheduled task {job} (flaky) after 3 failed runs in a row. "
                                    f"/tasks resume {job} starts it again."]
    await world.schedules.change(ADA, job, "resume")
    resumed = await world.store.job(job)
    assert resumed is not None and resumed.state is JobState.ACTIVE and resumed.failures == 0


async def test_a_check_that_breaks_counts_as_a_failed_run(world: World) -> None:
    world.checks = checks_for(ExecSettings(sandbox="none"), 10.0)
    job = await world.task("checked", When(RuleKind.EVERY, "UTC", T0 + 600, 600), check=CommandCheck("exit 3"))
    await world.start()
    for _ in range(3):
        await world.clock.advance(600)
        for _ in range(20):
            await settle()
            if await world.store.unclosed() == []:
                break
    paused = await world.store.job(job)
    assert world.runner.tasks == [] and paused is not None and paused.state is JobState.PAUSED


async def test_check_results_by_exit_and_output() -> None:
    run = checks_for(ExecSettings(sandbox="none"), 5.0)
    from bot.tools.base import ToolContext

    ctx = ToolContext(Path("/tmp"), DM, "check-1", "main", "42")
    assert await run.run(ctx, CommandCheck("printf ''")) == CheckResult(False)
    assert (await run.run(ctx, CommandCheck("echo hi"))) == CheckResult(True, "hi")
    assert "exited with 2" in (await run.run(ctx, CommandCheck("echo oops; exit 2"))).error
    assert "did not finish" in (await checks_for(ExecSettings(sandbox="none"), 0.3).run(
        ctx, CommandCheck("sleep 5"))).error
    assert "cannot run here" in (await Checks().run(ctx, CommandCheck("true"))).error


# -- the service's limits ---------------------------------------------------------------------


async def test_a_person_has_at_most_max_per_person_jobs(world: World) -> None:
    world.schedules = Schedules(world.store, ScheduleSettings(max_per_person=2), clock=world.clock)
    await world.remind("one", 60)
    await world.remind("two", 60)
    with pytest.raises(ScheduleError, match="you have 2 jobs already"):
        await world.remind("three", 60)


async def test_a_recurring_job_keeps_the_minimum_interval_a_one_shot_need_not(world: World) -> None:
    with pytest.raises(ScheduleError, match="at most every 5m"):
        await world.task("too often", When(RuleKind.EVERY, "UTC", T0 + 60, 60))
    with pytest.raises(ScheduleError, match="at most every 5m"):
        await world.task("too often", When(RuleKind.CRON, "UTC", T0, cron="*/2 * * * *"))
    await world.remind("in a minute is fine", 60)
    await world.task("every 5 min is fine", When(RuleKind.EVERY, "UTC", T0 + 300, 300))


async def test_a_time_past_is_refused(world: World) -> None:
    with pytest.raises(ScheduleError, match="has passed"):
        await world.task("late", When(RuleKind.AT, "UTC", T0 - 1))
