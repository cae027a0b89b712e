"""Per-session lanes: one active run per session, queue modes, concurrency caps.

A message for an idle session starts a run at once. A message for a busy session waits
in the session's queue (at most ``max_queued``), and is run after the active run:
``collect`` batches everything queued into one follow-up run, ``followup`` runs them one
by one, ``interrupt`` cancels the active run and goes on with the newest messages. A
queued run starts once no message has arrived for ``debounce`` seconds. Runs of
different sessions are concurrent, under a global cap and a per-group-chat cap; a run
waiting for a slot is reported as queued, never dropped.

Every task is owned by a lane; ``stop`` cancels the active run (or the queued one) and
discards the queue; ``aclose`` cancels everything and propagates.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from bot.messages import ChatType, InboundMessage

if TYPE_CHECKING:
    from bot.conversation import Conversation

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
class Pending:
    """One input of a session's next run: a stored inbound message, or (``msg`` None) a
    ``task`` with no inbound message (a scheduled job, the dashboard) for ``conversation``."""

    msg: InboundMessage | None
    inbound_id: int | None
    arrived: float = field(default_factory=time.monotonic)
    task: str = ""
    conversation: Conversation | None = None

    @property
    def chat(self) -> tuple[str, str]:
        if self.msg is not None:
            return self.msg.platform, self.msg.chat_id
        assert self.conversation is not None, "a task has its conversation"
        return self.conversation.platform, self.conversation.chat_id

    @property
    def in_group(self) -> bool:
        if self.msg is not None:
            return self.msg.chat_type is ChatType.GROUP
        return self.conversation is not None and self.conversation.is_group


@dataclass(frozen=True, slots=True)
class RunCaps:
    max_concurrent: int = 16
    max_per_group: int = 3
    queue_mode: QueueMode = QueueMode.COLLECT
    debounce: float = 0.5
    max_queued: int = 20


@dataclass(slots=True)
class ActiveRun:
    run_id: str
    session_key: str
    generation: int
    batch: tuple[Pending, ...]
    task: asyncio.Task[None] | None = None
    stopped: bool = False  # cancelled by /stop (or interrupt), not by shutdown

    @property
    def chat(self) -> tuple[str, str]:
        return self.batch[-1].chat


class RunRegistry(Protocol):
    """Active runs by id and session; an interface so several instances could share it."""

    def add(self, run: ActiveRun) -> None: ...
    def remove(self, run: ActiveRun) -> None: ...
    def get(self, run_id: str) -> ActiveRun | None: ...
    def runs(self) -> Iterable[ActiveRun]: ...


class LocalRegistry:
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


@dataclass(slots=True)
class _Lane:
    key: str
    group: tuple[str, str] | None  # (platform, chat id) of a group chat, for its cap
    queue: list[Pending] = field(default_factory=list)
    active: ActiveRun | None = None
    worker: asyncio.Task[None] | None = None
    generation: int = 0


class Dispatcher:
    def __init__(self, execute: Execute, limits: RunCaps = RunCaps(), *,
                 on_queued: OnQueued | None = None, on_discard: OnDiscard | None = None,
                 registry: RunRegistry | None = None) -> None:
        self._execute = execute
        self._limits = limits
        self._on_queued = on_queued
        self._on_discard = on_discard
        self.registry = registry or LocalRegistry()
        self._lanes: dict[str, _Lane] = {}
        self._slots = asyncio.Semaphore(limits.max_concurrent)
        self._group_slots: dict[tuple[str, str], asyncio.Semaphore] = {}

    def active(self, session_key: str) -> ActiveRun | None:
        lane = self._lanes.get(session_key)
        return lane.active if lane else None

    def generation(self, session_key: str) -> int:
        """Bumped by every /stop: a run of an older generation must not deliver."""
        lane = self._lanes.get(session_key)
        return lane.generation if lane else 0

    def queued(self, session_key: str) -> int:
        lane = self._lanes.get(session_key)
        return len(lane.queue) if lane else 0

    def submit(self, session_key: str, pending: Pending) -> Admission:
        """Take a stored message for its session: run it, queue it, or refuse (queue full)."""
        lane = self._lanes.get(session_key)
        if lane is None:
            group = pending.chat if pending.in_group else None
            lane = self._lanes[session_key] = _Lane(session_key, group)
        busy = lane.worker is not None and not lane.worker.done()
        if busy and len(lane.queue) >= self._limits.max_queued:
            return Admission.REJECTED
        if not busy:
            lane.worker = asyncio.create_task(self._work(lane, (pending,)), name=f"lane {session_key}")
            return Admission.STARTED
        lane.queue.append(pending)
        if self._limits.queue_mode is QueueMode.INTERRUPT and lane.active is not None:
            self._cancel(lane.active)
        return Admission.QUEUED

    async def stop(self, session_key: str) -> tuple[bool, int]:
        """/stop: cancel the active (or waiting) run and discard the queue.
        Returns (a run was stopped, how many queued messages were discarded)."""
        lane = self._lanes.get(session_key)
        if lane is None:
            return False, 0
        lane.generation += 1
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
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.wait(workers)

    def _cancel(self, run: ActiveRun) -> None:
        run.stopped = True
        if run.task is not None and not run.task.done():
            run.task.cancel()

    # -- the lane worker ---------------------------------------------------------------

    async def _work(self, lane: _Lane, first: tuple[Pending, ...]) -> None:
        """Run the first batch at once, then whatever queued meanwhile, debounced."""
        batch = first
        try:
            while batch:
                run = ActiveRun(uuid.uuid4().hex, lane.key, lane.generation, batch)
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
            if self._lanes.get(lane.key) is lane and not lane.queue:
                del self._lanes[lane.key]

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
            async with _Slot(group), self._slots:
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


class _Slot:
    """``async with`` a semaphore, or nothing."""

    def __init__(self, sem: asyncio.Semaphore | None) -> None:
        self._sem = sem

    async def __aenter__(self) -> None:
        if self._sem is not None:
            await self._sem.acquire()

    async def __aexit__(self, *exc: object) -> None:
        if self._sem is not None:
            self._sem.release()
