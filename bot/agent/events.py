"""Events a run emits while it lives; progress, tracing and logs subscribe.

Subscribers are independent: each gets events through its own callback, and one that
raises is logged and skipped, never breaking the run or the other subscribers.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from bot.conversation import Conversation
from bot.llm import ToolCall
from bot.providers.base import RetryInfo, Usage
from bot.tracing import TraceRecord

log = logging.getLogger(__name__)


class EventKind(StrEnum):
    STARTED = "run.started"
    ACTIVITY = "activity"  # the run entered a ``Phase``
    DELTA = "delta"  # a piece of the answer as the model streams it
    THINKING = "thinking"
    TOOL_CALL = "tool.call"
    TOOL_RESULT = "tool.result"
    RETRYING = "run.retrying"
    COMPLETED = "run.completed"
    FAILED = "run.failed"
    CANCELLED = "run.cancelled"
    # model calls beside a run, their record as ``trace``: a session's title, a compaction
    TITLE_CALLS = "calls.title"
    COMPACTION_CALLS = "calls.compaction"


class Phase(StrEnum):
    QUEUED = "queued"  # waiting for a slot (runs.max_concurrent)
    THINKING = "thinking"  # a model call begins
    TOOLS = "tools"  # the model's tool calls run


@dataclass(frozen=True, slots=True)
class RunEvent:
    kind: EventKind
    run_id: str
    conversation: Conversation
    text: str = ""  # words for the person: a delta or thinking as it streams; at the end, the answer or why not
    phase: Phase | None = None  # activity
    retry: RetryInfo | None = None
    usage: Usage | None = None
    tool: ToolCall | None = None  # tool.call and tool.result
    is_error: bool = False  # tool.result
    trace: TraceRecord | None = None  # run.completed, .failed, .cancelled: the run's trace as stored; calls: theirs


Subscriber: TypeAlias = Callable[[RunEvent], Awaitable[None] | None]


class Mailbox:
    """An ordered queue with one worker that hands each event to an async subscriber.

    Putting never waits, so a slow subscriber delays only its own mailbox; one that raises
    is logged and the next event is handled; ``aclose`` stops the worker."""

    def __init__(self, handler: Callable[[RunEvent], Awaitable[None]], name: str) -> None:
        self._handler = handler
        self._name = name
        self._queue: asyncio.Queue[RunEvent] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    def put(self, event: RunEvent) -> None:
        self._queue.put_nowait(event)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=f"mailbox {self._name}")

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.wait({self._worker})

    async def _work(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._handler(event)
            except Exception:
                log.exception("mailbox %s: handler failed", self._name)


class EventBus:
    """Fan-out of run events to subscribers that cannot hurt the run.

    A plain function is called inline (it must be quick); a coroutine function gets a
    mailbox of its own, so a slow one never holds up the run or the other subscribers."""

    def __init__(self) -> None:
        self._inline: list[Callable[[RunEvent], object]] = []
        self._mailboxes: dict[Subscriber, Mailbox] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        if inspect.iscoroutinefunction(subscriber):
            self._mailboxes[subscriber] = Mailbox(subscriber, getattr(subscriber, "__qualname__", "subscriber"))
            return lambda: self._unsubscribe(subscriber)
        self._inline.append(subscriber)
        return lambda: self._inline.remove(subscriber)

    async def emit(self, event: RunEvent) -> None:
        for subscriber in self._inline:
            try:
                subscriber(event)
            except Exception:
                log.exception("event subscriber failed on %s run=%s", event.kind, event.run_id)
        for mailbox in self._mailboxes.values():
            mailbox.put(event)

    async def aclose(self) -> None:
        for mailbox in self._mailboxes.values():
            await mailbox.aclose()

    def _unsubscribe(self, subscriber: Subscriber) -> None:
        mailbox = self._mailboxes.pop(subscriber)
        task = asyncio.get_running_loop().create_task(mailbox.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
