"""The Provider port: one streaming chat call, whatever the vendor.

A provider turns a ``ChatRequest`` into a stream of ``StreamEvent``s that always ends
with exactly one ``Completed`` (the whole assistant message, usage and stop reason), or
raises a ``bot.errors.ProviderError``. Retries happen inside the provider, before the
first event is yielded, and are reported through ``on_retry``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeAlias

from bot.llm import Message, Role, TextPart


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One request. ``system`` is the stable system prompt (cacheable); ``volatile`` is
    system text that changes from turn to turn (runtime, current time): providers send it
    after everything cacheable, at the end of the newest user turn (``with_volatile``), so
    the prompt prefix stays byte-identical between turns and the providers' caches hit."""

    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    volatile: str = ""
    reasoning_effort: str | None = None  # none | minimal | low | medium | high | xhigh; None: the model's own


# how the volatile system text is marked where it is sent: written by chatgate, not by the user
VOLATILE_OPEN = '\n\n<chatgate-context note="added by the system, not written by the user">\n'
VOLATILE_CLOSE = "\n</chatgate-context>"


def newest_user_turn(messages: tuple[Message, ...]) -> int | None:
    """The index of the last user message (not a tool result): where the current turn starts."""
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role is Role.USER), None)


def with_volatile(messages: tuple[Message, ...], volatile: str) -> tuple[Message, ...]:
    """The messages with ``volatile`` appended, as its own text part, to the newest user turn."""
    i = newest_user_turn(messages) if volatile else None
    if i is None:
        return messages
    m = messages[i]
    return (*messages[:i], Message(m.role, (*m.parts, TextPart(f"{VOLATILE_OPEN}{volatile}{VOLATILE_CLOSE}"))),
            *messages[i + 1:])


class StopReason(StrEnum):
    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one request. ``input_tokens`` is the whole prompt, cached parts included
    (providers normalise to this); ``cache_read_tokens`` and ``cache_write_tokens`` are the
    parts of it read from and written to the provider's prompt cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a tool call as it streams: ``id`` and ``name`` arrive first."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class Completed:
    message: Message  # role=assistant: thinking, text and tool-call parts in order
    stop_reason: StopReason
    usage: Usage
    model: str


StreamEvent: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | Completed


@dataclass(frozen=True, slots=True)
class RetryInfo:
    attempt: int  # 1 for the first retry
    max_retries: int
    delay: float  # seconds we are about to wait
    reason: str  # short, e.g. "429 rate limited"


OnRetry: TypeAlias = Callable[[RetryInfo], Awaitable[None] | None]


class Provider(Protocol):
    name: str

    def stream(self, request: ChatRequest, *, on_retry: OnRetry | None = None) -> AsyncGenerator[StreamEvent, None]:
        """Stream one assistant turn; cancelling the consumer or ``aclose()`` closes the HTTP stream."""
        ...

    async def aclose(self) -> None: ...


async def complete(provider: Provider, request: ChatRequest, *, on_retry: OnRetry | None = None) -> Completed:
    """Run a request to the end and return its ``Completed`` event."""
    async with aclosing(provider.stream(request, on_retry=on_retry)) as events:
        async for event in events:
            if isinstance(event, Completed):
                return event
    raise RuntimeError(f"provider {provider.name} ended its stream without a Completed event")
