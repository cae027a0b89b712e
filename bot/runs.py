"""Per-session lanes: messages decided in order, one active run per session, queue modes, caps.

Each session has one lane, with two stages. The intake hands it stored messages to decide
(``decide``: access, commands, limits, files; at most ``max_waiting`` waiting), one after
another in arrival order, in a task of the lane's that runs beside the active run, so that
``/status`` and friends answer at once while a run goes on. A decided message comes back
as ``submit``, the run stage:

A message for an idle session starts a run at once. A message for a busy session waits
in the session's queue (at most ``max_queued``), and is run after the active run:
``collect`` batches everything queued into one follow-up run, ``followup`` runs them one
by one, ``interrupt`` cancels the active run and goes on with the newest messages. A
queued run starts once no message has arrived for ``debounce`` seconds. Runs of
different sessions are concurrent, under a global cap and a per-group-chat cap; a run
waiting for a slot is reported as queued, never dropped.

Every task is owned by a lane, and a lane lives while it has work in either stage; ``stop``
cancels the active run (or the queued one) and discards the queue (messages still being
decided go on: each is answered); ``aclose`` cancels everything and propagates.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from bot.messages import InboundMessage
from bot.tasks import cancel_all

if TYPE_CHECKING:
    from bot.agent.prompt import PromptMode
    from bot.conversation import Conversation
    from bot.outbound.progress import Progress

log = logging.getLogger(__name__)


class QueueMode(StrEnum):
    COLLECT = "collect"
    FOLLOWUP = "followup"
    INTERRUPT = "interrupt"


class Admission(StrEnum):
    STARTED = "started"  # a run starts now (or as soon as a slot is free)
    QUEUED = "queued"  # waits behind the session's active run
    REJECTED = "rejected"  # the session's queue is full


@dataclass(frozen=True, slots=True)
class TaskOrder:
    """How a task runs when more than its text is given (a scheduled job): whom it acts for
    (``user_id``, for the tools) and whether they are an owner (their tool policy), whom its
    model calls are charged to, the system prompt (None: the agent's), what its turn writes
    too (``commits``: an operation of ``bot.store.op`` given how the turn ended and the commit's
    time, run in the turn's transaction; a scheduled task's closes its occurrence), and
    ``ended``, told how the turn ended: completed, silent, failed or stopped (a shutdown cancels
    it instead)."""

    user_id: str = ""
    owner: bool = False
    payers: tuple[str, ...] = ()
    users: tuple[str, ...] = ()  # every person it acts for (``user_id`` last); () = ``user_id``
    prompt_mode: PromptMode | None = None
    commits: Callable[[str, float], Generator[Any, Any, object]] | None = None
    ended: asyncio.Future[str] | None = field(default=None, compare=False, repr=False)

    def end(self, outcome: str | None) -> None:
        """Tell ``ended`` (None: cancel it, the turn was cut short by shutdown)."""
        if self.ended is None or self.ended.done():
            return
        if outcome is None:
            self.ended.cancel()
        else:
            self.ended.set_result(outcome)


@dataclass(frozen=True, slots=True)
class Pending:
    """One input of a session's next run, in ``conversation``: a stored inbound message, or
    (``msg`` None) a ``task`` with no inbound message (a scheduled job, the dashboard), with
    its ``order`` when it brings one."""

    msg: InboundMessage | None
    inbound_id: int | None
    conversation: Conversation
    arrived: float = field(default_factory=time.monotonic)
    task: str = ""
    order: TaskOrder | None = None

    @property
    def chat(self) -> tuple[str, str]:
        return self.conversation.platform, self.conversation.chat_id


@dataclass(frozen=True, slots=True)
class RunCaps:
    max_concurrent: int = 16
    max_per_group: int = 3
    queue_mode: QueueMode = QueueMode.COLLECT
    debounce: float = 0.5
    max_queued: int = 20
    max_waiting: int = 64  # messages of one session waiting to be decided; beyond, the intake answers busy


@dataclass(slots=True)
class ActiveRun:
    run_id: str
    session_key: str
    batch: tuple[Pending, ...]
    task: asyncio.Task[None] | None = None
    stopped: bool = False  # cancelled by /stop (or interrupt), not by shutdown
    # while the turn runner runs it: the conversation it serves, the chat's progress, extra messages sent
    conversation: Conversation | None = None
    progress: Progress | None = None
    extra: int = 0

    @property
    def chat(self) -> tuple[str, str]:
        return self.batch[-1].chat


class LocalRegistry:
    """The active runs by id (the turn runner's lookups, the dashboard's board)."""

    def __init__(self) -> None:
        self._runs: dict[str, ActiveRun] = {}

    def add(self, run: ActiveRun) -> None:
        self._runs[run.run_id] = run

    def remove(self, run: ActiveRun) -> None:
        self._runs.pop(run.run_id, None)

    def get(self, run_id: str) -> ActiveRun | None:
        return self._runs.get(run_id)

    def runs(self) -> Iterable[ActiveRun]:
        return tuple(self._runs.values())


# Runs one batch; owns delivery of its result. Discarded runs are told through on_discard.
Execute = Callable[[ActiveRun], Coroutine[Any, Any, None]]
OnQueued = Callable[[ActiveRun], Awaitable[None]]
OnDiscard = Callable[[tuple[Pending, ...]], Awaitable[None]]
Decide = Callable[[], Awaitable[None]]  # decides one stored message (and submits it when it is to run)


@dataclass(slots=True)
class _Lane:
    key: str
    group: tuple[str, str] | None  # (platform, chat id) of a group chat, for its cap
    undecided: deque[Decide] = field(default_factory=deque)
    decider: asyncio.Task[None] | None = None
    queue: list[Pending] = field(default_factory=list)
    active: ActiveRun | None = None
    worker: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        return not (self.undecided or self.queue or self.decider or self.worker)


class Dispatcher:
    def __init__(self, execute: Execute, limits: RunCaps = RunCaps(), *,
                 on_queued: OnQueued | None = None, on_discard: OnDiscard | None = None,
                 on_idle: Callable[[str], None] | None = None) -> None:
        self._execute = execute
        self._limits = limits
        self._on_queued = on_queued
        self._on_discard = on_discard
        self._on_idle = on_idle  # told when a session's lane has no work left (several instances: let it go)
        self.registry = LocalRegistry()
        self._lanes: dict[str, _Lane] = {}
        self._slots = asyncio.Semaphore(limits.max_concurrent)
        self._group_slots: dict[tuple[str, str], asyncio.Semaphore] = {}

    def active(self, session_key: str) -> ActiveRun | None:
        lane = self._lanes.get(session_key)
        return lane.active if lane else None

    def busy(self, session_key: str) -> bool:
        """The session's lane has work (messages being decided, queued, or a run)."""
        return session_key in self._lanes

    def abandon(self, session_key: str) -> None:
        """End the session's lane as shutdown would (nothing answered, nothing discarded): another
        instance took the session over and runs what is unanswered."""
        lane = self._lanes.get(session_key)
        if lane is not None:
            lane.undecided.clear()
            lane.queue.clear()
            for task in (lane.decider, lane.worker):
                if task is not None:
                    task.cancel()

    def queued(self, session_key: str) -> int:
        """Messages of the session waiting: to be decided, or to run."""
        lane = self._lanes.get(session_key)
        return len(lane.queue) + len(lane.undecided) if lane else 0

    def load(self) -> tuple[int, int]:
        """(sessions with work here, messages waiting in them: to be decided or to run), for metrics."""
        return len(self._lanes), sum(len(lane.queue) + len(lane.undecided) for lane in self._lanes.values())

    def decide(self, session_key: str, step: Decide, group: tuple[str, str] | None = None) -> bool:
        """Take one stored message to decide in the session's lane, after those before it; False
        (not taken) when ``max_waiting`` are waiting already. ``group``: the (platform, chat id) of
        a group chat, for its cap."""
        lane = self._lane(session_key, group)
        if len(lane.undecided) >= self._limits.max_waiting:
            return False
        lane.undecided.append(step)
        if lane.decider is None:
            lane.decider = asyncio.create_task(self._decide(lane), name=f"intake {session_key}")
        return True

    def submit(self, session_key: str, pending: Pending) -> Admission:
        """Take a stored message for its session: run it, queue it, or refuse (queue full)."""
        lane = self._lane(session_key, pending.chat if pending.conversation.is_group else None)
        busy = lane.worker is not None and not lane.worker.done()
        if busy and len(lane.queue) >= self._limits.max_queued:
            return Admission.REJECTED
        if not busy:
            lane.worker = asyncio.create_task(self._work(lane, (pending,)), name=f"lane {session_key}")
            return Admission.STARTED
        lane.queue.append(pending)
        if self._limits.queue_mode is QueueMode.INTERRUPT and lane.active is not None and pending.msg is not None:
            self._cancel(lane.active)  # a person's new message interrupts; a task (a scheduled job) waits its turn
        return Admission.QUEUED

    async def stop(self, session_key: str) -> tuple[bool, int]:
        """/stop: cancel the active (or waiting) run and discard the queue.
        Returns (a run was stopped, how many queued messages were discarded)."""
        lane = self._lanes.get(session_key)
        if lane is None:
            return False, 0
        discarded = tuple(lane.queue)
        lane.queue.clear()
        stopped = False
        if lane.active is not None:
            stopped = True
            self._cancel(lane.active)
            if lane.active.task is not None:
                await asyncio.wait({lane.active.task})
        if discarded and self._on_discard is not None:
            await self._on_discard(discarded)
        return stopped, len(discarded)

    async def stop_chat(self, platform: str, chat_id: str) -> int:
        """/stopall: stop every session of one chat; how many runs were stopped."""
        keys = [lane.key for lane in self._lanes.values() if lane.active is not None and lane.active.chat == (
            platform, chat_id)]
        results = [await self.stop(key) for key in keys]
        return sum(stopped for stopped, _ in results)

    async def aclose(self) -> None:
        """Shutdown: cancel every lane and wait; nothing is discarded (recovery runs it later)."""
        workers = [task for lane in self._lanes.values() for task in (lane.decider, lane.worker) if task is not None]
        await cancel_all(workers)

    def _cancel(self, run: ActiveRun) -> None:
        run.stopped = True
        if run.task is not None and not run.task.done():
            run.task.cancel()

    def _lane(self, key: str, group: tuple[str, str] | None) -> _Lane:
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(key, group)
        return lane

    def _release(self, lane: _Lane) -> None:
        if self._lanes.get(lane.key) is lane and lane.idle:
            del self._lanes[lane.key]
            if self._on_idle is not None:
                self._on_idle(lane.key)

    # -- the lane's tasks --------------------------------------------------------------

    async def _decide(self, lane: _Lane) -> None:
        """Decide the waiting messages one by one (a step answers its own failures; one that
        escapes is logged and the lane goes on)."""
        try:
            while lane.undecided:
                try:
                    await lane.undecided[0]()
                except Exception:
                    log.exception("deciding a message failed session=%s", lane.key)
                finally:
                    lane.undecided.popleft()
        finally:
            lane.decider = None
            self._release(lane)

    async def _work(self, lane: _Lane, first: tuple[Pending, ...]) -> None:
        """Run the first batch at once, then whatever queued meanwhile, debounced."""
        batch = first
        try:
            while batch:
                run = ActiveRun(uuid.uuid4().hex, lane.key, batch)
                lane.active = run
                self.registry.add(run)
                try:
                    await self._run(lane, run)
                finally:
                    lane.active = None
                    self.registry.remove(run)
                await self._debounce(lane)
                batch = self._take(lane)
        finally:
            lane.worker = None
            self._release(lane)

    async def _debounce(self, lane: _Lane) -> None:
        """A follow-up run starts once no message arrived for ``debounce`` seconds."""
        while lane.queue and (quiet := time.monotonic() - lane.queue[-1].arrived) < self._limits.debounce:
            await asyncio.sleep(self._limits.debounce - quiet)

    def _take(self, lane: _Lane) -> tuple[Pending, ...]:
        if not lane.queue:
            return ()
        if self._limits.queue_mode is QueueMode.FOLLOWUP or lane.queue[0].msg is None:
            return (lane.queue.pop(0),)  # a task is a run of its own
        count = next((i for i, p in enumerate(lane.queue) if p.msg is None), len(lane.queue))
        batch = tuple(lane.queue[:count])
        del lane.queue[:count]
        return batch

    async def _run(self, lane: _Lane, run: ActiveRun) -> None:
        """Wait for a slot (reported as queued), then execute. /stop ends it quietly,
        in either state; a cancellation from outside (shutdown) propagates."""
        group = None
        if lane.group is not None:
            group = self._group_slots.setdefault(lane.group, asyncio.Semaphore(self._limits.max_per_group))
        run.task = asyncio.current_task()  # while waiting for a slot, /stop cancels the wait
        inner: asyncio.Task[None] | None = None
        try:
            if (group is not None and group.locked()) or self._slots.locked():
                if self._on_queued is not None:
                    await self._on_queued(run)
            async with group or nullcontext(), self._slots:
                inner = asyncio.create_task(self._execute(run), name=f"run {run.run_id}")
                run.task = inner
                await asyncio.shield(inner)
        except asyncio.CancelledError:
            if inner is not None and not inner.done():
                inner.cancel()
                await asyncio.wait({inner})
            if not run.stopped:
                raise  # shutdown
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                me.uncancel()  # our own /stop of a waiting run: the lane goes on

