"""Traces of runs: one per run, with a span for each LLM call and each tool call.

A ``TraceBuilder`` collects spans while the run lives (no I/O); the finished
``TraceRecord`` is stored with the run's turn, in the same transaction. Previews are
capped at 500 characters and scrubbed of secrets: known key shapes and every configured
secret value. ``format_traces`` renders them for ``chatgate traces``, without control
characters (a span preview can hold whatever a tool printed).

The same ``Redactor`` scrubs every log record: ``RedactingFilter`` is a ``logging.Filter``
that the CLI puts on every handler of the root logger, so the message, its
arguments, the exception text and the stack of every record pass through it, whichever
library logged it. ``mask_url`` hides the credentials of a URL (``user:pass@``, a bot
token in the path, ``?token=``) for what ``chatgate check`` prints.
"""

from __future__ import annotations

import logging
import re
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from bot.providers.base import Usage

PREVIEW_CHARS = 500

MASK = "***"
# Shapes of well-known credentials: OpenAI/Anthropic keys, Slack tokens, Telegram bot
# tokens (also glued to "bot" in a Bot API URL: /bot123:AA.../getMe), bearer headers,
# GitHub and AWS keys, Discord bot tokens.
_SECRET_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}"
    r"|(?:(?<=bot)|\b)\d{5,12}:[A-Za-z0-9_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-~+/]{16,}=*"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|AKIA[0-9A-Z]{16}"
    r"|\b[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}\b"
)
# The password of user:password@host in a URL.
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s:@]+):([^/\s@]+)@")
# A query parameter that carries a credential.
_QUERY_SECRET = re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access_token|secret|password|passwd|sig|signature)=)"
                           r"[^&#\s]+")
# A path segment that looks like a token: long, and mixing letters with digits.
_TOKEN_SEGMENT = re.compile(r"(?<=/)(?=[^/?#\s]*\d)(?=[^/?#\s]*[A-Za-z])[A-Za-z0-9_\-:.~]{24,}(?=[/?#]|$)")
# What a terminal would act on: escape sequences (CSI, OSC), then C0 controls but tab and
# newline, DEL and C1 controls.
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class SpanKind(StrEnum):
    LLM = "llm"
    TOOL = "tool"
    AGENT = "agent"  # a sub-agent run; its tokens and cost count in its parent's run
    APPROVAL = "approval"  # a call waiting for a person: asked, who decided what, how long it waited


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
    why: str = ""  # why the run used its model: default, chosen <name>, fallback <name> for <name>: <reason>


def mask_url(url: str) -> str:
    """``url`` with its credentials hidden: the password of ``user:pass@``, token-like path
    segments (``/bot123:AA…/``, ``/hooks/T0…/B0…/XyZ…``) and credential query parameters."""
    url = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", url)
    url = _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, url)
    url = _SECRET_SHAPES.sub(MASK, url)
    return _TOKEN_SEGMENT.sub(MASK, url)


def strip_controls(text: str) -> str:
    """``text`` without control characters (escape sequences, carriage returns, NUL...):
    what a terminal shows of user-supplied text must not be able to drive the terminal."""
    return _CONTROL.sub("", text)


class Redactor:
    """Removes secrets from text: configured values first (any length), then known shapes
    and the passwords of URLs."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._values = re.compile("|".join(map(re.escape, values))) if values else None

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(MASK, text)
        text = _SECRET_SHAPES.sub(MASK, text)
        return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text) if "@" in text else text

    def preview(self, text: str) -> str:
        text = self(text[: PREVIEW_CHARS * 2])  # scrub before cutting, so a cut never leaves half a key
        return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


class RedactingFilter(logging.Filter):
    """Scrubs a record in place (message with its arguments, exception text, stack) before
    any handler formats it. Put it on handlers, not loggers: a logger's filters do not see
    the records its children propagate."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_chatgate_redacted", None) is self.redact:
            return True  # another handler's filter with the same secrets did it already
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what there is, scrubbed
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = self.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        record._chatgate_redacted = self.redact
        return True


class Billing(Protocol):
    """What a run's model calls are charged to, each as it is made: ``bot.limits.Bill`` (which
    also totals the charges per person; whoever made the bill reads them from it)."""

    def add(self, usage: Usage, cost: float) -> None: ...


@dataclass
class TraceBuilder:
    run_id: str
    session_key: str
    agent_id: str
    model: str
    redact: Redactor = field(default_factory=Redactor)
    started_at: float = field(default_factory=time.time)
    spans: list[Span] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    bill: Billing | None = None  # charged here: every model call of a run passes through ``llm`` once
    why: str = ""  # why the run uses its model (``bot.routing.Route.why_text``)

    def llm(self, model: str, started: float, usage: Usage, cost: float, *, is_error: bool = False,
            preview: str = "") -> None:
        self.usage += usage
        self.cost += cost
        if self.bill is not None:
            self.bill.add(usage, cost)
        self.spans.append(Span(SpanKind.LLM, model, started, (time.time() - started) * 1000, usage.input_tokens,
                               usage.output_tokens, cost, is_error, self.redact.preview(preview),
                               usage.cache_read_tokens, usage.cache_write_tokens))

    def tool(self, name: str, started: float, *, is_error: bool, output: str, seconds: float) -> None:
        self.spans.append(Span(SpanKind.TOOL, name, started, seconds * 1000,
                               is_error=is_error, preview=self.redact.preview(output)))

    def approval(self, tool: str, started: float, outcome: str) -> None:
        """A tool call that waited for a person (``outcome``: who decided what)."""
        self.spans.append(Span(SpanKind.APPROVAL, tool, started, (time.time() - started) * 1000,
                               is_error=not outcome.startswith("allowed"), preview=self.redact.preview(outcome)))

    def sub_agent(self, session_key: str, started: float, usage: Usage, cost: float, *, is_error: bool,
                  output: str, seconds: float) -> None:
        """A sub-agent's run as a span of this run; its tokens and cost are added to this run's
        (its calls were charged on its own bill, so this one is not charged again)."""
        self.usage += usage
        self.cost += cost
        self.spans.append(Span(SpanKind.AGENT, session_key, started, seconds * 1000, usage.input_tokens,
                               usage.output_tokens, cost, is_error, self.redact.preview(output),
                               usage.cache_read_tokens, usage.cache_write_tokens))

    def finish(self, status: str, iterations: int, error: str | None = None) -> TraceRecord:
        return TraceRecord(self.run_id, self.session_key, self.agent_id, self.started_at, time.time(), status,
                           self.model, self.usage.input_tokens, self.usage.output_tokens, self.cost, iterations,
                           error, tuple(self.spans), self.usage.cache_read_tokens, self.usage.cache_write_tokens,
                           self.why)


def format_traces(traces: Iterable[TraceRecord]) -> str:
    """A readable table: one line per run, an indented line per span."""
    lines: list[str] = []
    for t in traces:
        when = datetime.fromtimestamp(t.started_at).strftime("%Y-%m-%d %H:%M:%S")
        seconds = t.ended_at - t.started_at
        lines.append(f"{when}  {t.status:<9}  {seconds:6.2f} s  {t.input_tokens:>7} in {t.output_tokens:>6} out"
                     f"{_cached(t.cache_read_tokens, t.cache_write_tokens)}"
                     f"  ${t.cost:.4f}  {t.iterations} it  {strip_controls(t.model)}"
                     f"{f' ({strip_controls(t.why)})' if t.why else ''}  {strip_controls(t.session_key)}"
                     f"  run {strip_controls(t.run_id[:8])}")
        if t.error:
            lines.append(f"    error: {strip_controls(t.error)}")
        for s in t.spans:
            if s.kind is SpanKind.APPROVAL:
                detail = "waited"
            elif s.kind is not SpanKind.TOOL:
                detail = (f"{s.input_tokens:>7} in {s.output_tokens:>6} out"
                          f"{_cached(s.cache_read_tokens, s.cache_write_tokens)}  ${s.cost:.4f}")
            else:
                detail = "error" if s.is_error else "ok"
            preview = strip_controls(s.preview.replace("\n", " ").replace("\t", " "))[:80]
            lines.append(f"    {s.kind.value:<4} {strip_controls(s.name):<24} {s.duration_ms:8.0f} ms  {detail}"
                         + (f"  {preview}" if preview else ""))
    return "\n".join(lines) if lines else "no traces yet"


def _cached(read: int, write: int) -> str:
    """The prompt-cache part of a token count, when there is one."""
    if not read and not write:
        return ""
    return f" ({read} cached" + (f", {write} to cache)" if write else ")")
