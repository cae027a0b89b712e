"""Traces of runs: one per run, with a span for each LLM call and each tool call.

A ``TraceBuilder`` collects spans while the run lives (no I/O); the finished
``TraceRecord`` is stored with the run's turn, in the same transaction. Previews are
capped at 500 characters and scrubbed of secrets: known key shapes and every configured
secret value. ``format_traces`` renders them for ``chatgate traces``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from bot.providers.base import Usage

PREVIEW_CHARS = 500

# Shapes of well-known credentials: OpenAI/Anthropic keys, Slack tokens, Telegram bot
# tokens, bearer headers, GitHub and AWS keys.
_SECRET_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}"
    r"|\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}"
)


class SpanKind(StrEnum):
    LLM = "llm"
    TOOL = "tool"
    AGENT = "agent"  # a sub-agent run; its tokens and cost count in its parent's run


@dataclass(frozen=True, slots=True)
class Span:
    kind: SpanKind
    name: str  # model for LLM spans, tool name for tool spans
    started_at: float
    duration_ms: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    is_error: bool = False
    preview: str = ""  # at most PREVIEW_CHARS, scrubbed
    cache_read_tokens: int = 0  # parts of input_tokens read from / written to the prompt cache
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class TraceRecord:
    run_id: str
    session_key: str
    agent_id: str
    started_at: float
    ended_at: float
    status: str  # completed | silent | failed | cancelled
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    iterations: int = 0
    error: str | None = None
    spans: tuple[Span, ...] = ()
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class Redactor:
    """Removes secrets from text: configured values first, then known shapes."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True)
        self._values = re.compile("|".join(map(re.escape, values))) if values else None

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub("***", text)
        return _SECRET_SHAPES.sub("***", text)

    def preview(self, text: str, limit: int = PREVIEW_CHARS) -> str:
        text = self(text[: limit * 2])  # scrub before cutting, so a cut never leaves half a key
        return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class TraceBuilder:
    run_id: str
    session_key: str
    agent_id: str
    model: str
    redact: Redactor = field(default_factory=Redactor)
    clock: Callable[[], float] = time.time
    started_at: float = 0.0
    spans: list[Span] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0

    def __post_init__(self) -> None:
        self.started_at = self.clock()

    def llm(self, model: str, started: float, usage: Usage, cost: float, *, is_error: bool = False,
            preview: str = "") -> None:
        self.usage += usage
        self.cost += cost
        self.spans.append(Span(SpanKind.LLM, model, started, (self.clock() - started) * 1000, usage.input_tokens,
                               usage.output_tokens, cost, is_error, self.redact.preview(preview),
                               usage.cache_read_tokens, usage.cache_write_tokens))

    def tool(self, name: str, started: float, *, is_error: bool, output: str, seconds: float | None = None) -> None:
        duration = (self.clock() - started) if seconds is None else seconds
        self.spans.append(Span(SpanKind.TOOL, name, started, duration * 1000,
                               is_error=is_error, preview=self.redact.preview(output)))

    def sub_agent(self, session_key: str, started: float, usage: Usage, cost: float, *, is_error: bool,
                  output: str, seconds: float) -> None:
        """A sub-agent's run as a span of this run; its tokens and cost are added to this run's."""
        self.usage += usage
        self.cost += cost
        self.spans.append(Span(SpanKind.AGENT, session_key, started, seconds * 1000, usage.input_tokens,
                               usage.output_tokens, cost, is_error, self.redact.preview(output),
                               usage.cache_read_tokens, usage.cache_write_tokens))

    def finish(self, status: str, iterations: int, error: str | None = None) -> TraceRecord:
        return TraceRecord(self.run_id, self.session_key, self.agent_id, self.started_at, self.clock(), status,
                           self.model, self.usage.input_tokens, self.usage.output_tokens, self.cost, iterations,
                           error, tuple(self.spans), self.usage.cache_read_tokens, self.usage.cache_write_tokens)


def format_traces(traces: Iterable[TraceRecord]) -> str:
    """A readable table: one line per run, an indented line per span."""
    lines: list[str] = []
    for t in traces:
        when = datetime.fromtimestamp(t.started_at).strftime("%Y-%m-%d %H:%M:%S")
        seconds = t.ended_at - t.started_at
        lines.append(f"{when}  {t.status:<9}  {seconds:6.2f} s  {t.input_tokens:>7} in {t.output_tokens:>6} out"
                     f"{_cached(t.cache_read_tokens, t.cache_write_tokens)}"
                     f"  ${t.cost:.4f}  {t.iterations} it  {t.model}  {t.session_key}  run {t.run_id[:8]}")
        if t.error:
            lines.append(f"    error: {t.error}")
        for s in t.spans:
            if s.kind is not SpanKind.TOOL:
                detail = (f"{s.input_tokens:>7} in {s.output_tokens:>6} out"
                          f"{_cached(s.cache_read_tokens, s.cache_write_tokens)}  ${s.cost:.4f}")
            else:
                detail = "error" if s.is_error else "ok"
            preview = s.preview.replace("\n", " ")[:80]
            lines.append(f"    {s.kind.value:<4} {s.name:<24} {s.duration_ms:8.0f} ms  {detail}"
                         + (f"  {preview}" if preview else ""))
    return "\n".join(lines) if lines else "no traces yet"


def _cached(read: int, write: int) -> str:
    """The prompt-cache part of a token count, when there is one."""
    if not read and not write:
        return ""
    return f" ({read} cached" + (f", {write} to cache)" if write else ")")
