"""Events a run emits while it lives; adapters, tracing and logs subscribe.

Subscribers are independent: each gets events through its own callback, and one that
raises is logged and skipped, never breaking the run or the other subscribers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from bot.conversation import ToolCall
from bot.providers.base import RetryInfo, Usage

log = logging.getLogger(__name__)


class EventKind(StrEnum):
    STARTED = "run.started"
    ACTIVITY = "activity"
    CHUNK = "chunk"
    THINKING = "thinking"
    TOOL_CALL = "tool.call"
    TOOL_RESULT = "tool.result"
    RETRYING = "run.retrying"
    COMPLETED = "run.completed"
    FAILED = "run.failed"
    CANCELLED = "run.cancelled"


@dataclass(frozen=True, slots=True)
class RunEvent:
    kind: EventKind
    run_id: str
    session_key: str
    text: str = ""  # chunk or thinking text, activity phase, final answer, error sentence, tool preview
    retry: RetryInfo | None = None
    usage: Usage | None = None
    tool: ToolCall | None = None  # tool.call and tool.result
    is_error: bool = False  # tool.result
    iteration: int = 0  # activity: which LLM call of the run


Subscriber: TypeAlias = Callable[[RunEvent], Awaitable[None] | None]


class EventBus:
    """Fan-out of run events to subscribers that cannot hurt the run."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    async def emit(self, event: RunEvent) -> None:
        for subscriber in self._subscribers:
            try:
                result = subscriber(event)
                if result is not None:
                    await result
            except Exception:
                log.exception("event subscriber failed on %s run=%s", event.kind, event.run_id)
