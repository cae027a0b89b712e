"""Compaction: a long session's older messages become one summary, so requests stay bounded.

Two places use it:

- **Mid-loop** (``bot.agent.loop``): when the next request would pass ``trigger_ratio`` of
  the context window, the oldest ~70 % of what is about to be sent is summarised *in
  memory* for the rest of the run; the store is not touched.
- **After a run** (``Compactor.compact``, called by the turn runner after the answer is handed
  to delivery, or forced by ``/compact``): when the session holds more than
  ``trigger_messages`` live messages or its last prompt passed ``trigger_ratio``. Under a
  per-session try-lock (a second compaction of the same session is skipped, never run at
  once): first the memory flush, a minimal-prompt turn with the file tools that writes
  what is worth keeping to ``memory/YYYY-MM-DD.md`` (``NO_REPLY`` when there is nothing;
  in group workspaces only with ``memory_flush: all``; with exactly the file tools the
  run's tool policy permits, skipped when none can write), then the summary of everything
  but the last ``keep_last`` messages, the previous summary included. The summary and the
  cut are saved in one transaction; the messages stay in the store, marked compacted.

A cut never separates a tool call from its results (``safe_cut``), and the history
pipeline repairs pairing on every request anyway. Whatever fails or times out leaves the
history as it was and is logged; cancellation (``/stop``, shutdown) propagates. Its traces
are scrubbed with the app's ``Redactor``, and its model calls are charged (``Bill``) to the
people of the run it followed, or to whoever sent ``/compact``, and returned (``calls``).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import StrEnum
from typing import Literal

from bot import tokens
from bot.agent.history import repair_pairing
from bot.errors import ProviderError
from bot.limits import Bill, Meter
from bot.llm import ImagePart, Message, Role, TextPart, ToolCall, ToolResult
from bot.providers.base import ChatRequest, Usage, complete
from bot.routing.spec import Route
from bot.store.base import CompactingStore, Session, Summary, Turn
from bot.tools.base import ToolCategory, ToolContext
from bot.tools.policy import ToolPolicy
from bot.tools.registry import ToolRegistry
from bot.tracing import Redactor, TraceBuilder, TraceRecord

log = logging.getLogger(__name__)

SUMMARY_HEADER = "[Summary of the earlier conversation; the messages it replaces are no longer shown]"
SUMMARY_SYSTEM = (
    "You summarise a conversation between a user and an AI assistant so that the assistant can go on "
    "without the original messages. Keep: the user's goals and open requests, decisions and their "
    "reasons, facts about the user and their preferences, names, numbers, file paths and commands that "
    "matter, what tools found or changed, and what was left unfinished. Drop greetings, repetition and "
    "raw tool output. Write short paragraphs or a list in the conversation's language; no preamble."
)
FLUSH_INSTRUCTION = (
    "[Memory flush] This conversation is about to be compacted: older messages will be replaced by a "
    "summary. Before that, save what is worth remembering for a long time (facts about the user, "
    "preferences, decisions, commitments, things to follow up) by appending to memory/{day}.md in the "
    "workspace with the file tools (read it first if it exists, then write the whole file). Do not save "
    "small talk or what is already in MEMORY.md. When there is nothing worth keeping, or when you have "
    "saved it, answer exactly NO_REPLY."
)
MID_LOOP_SHARE = 0.7  # of the messages, oldest first, summarised mid-loop
RESULT_CHARS = 1_500  # of a tool result shown to the summariser
TEXT_CHARS = 6_000  # of any other part


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    enabled: bool = True
    trigger_ratio: float = 0.75
    trigger_messages: int = 50
    keep_last: int = 4
    summary_max_tokens: int = 1024
    memory_flush: Literal["off", "dm", "all"] = "dm"
    flush_iterations: int = 5
    flush_timeout: float = 90.0
    summary_timeout: float = 120.0
    temperature: float = 0.3


class Outcome(StrEnum):
    COMPACTED = "compacted"
    NOT_NEEDED = "not_needed"
    BUSY = "busy"  # another compaction of this session is running
    FAILED = "failed"  # history left as it was


@dataclass(frozen=True, slots=True)
class CompactionResult:
    outcome: Outcome
    messages: int = 0  # messages the summary replaced
    tokens_before: int = 0
    tokens_after: int = 0
    flushed: bool = False  # the memory flush ran to its end
    calls: TraceRecord | None = None  # its model calls (flush and summary), as stored with its turn


# --------------------------------------------------------------------------- pure parts


def compact_reply(result: CompactionResult) -> str:
    """What ``/compact`` answers."""
    if result.outcome is Outcome.COMPACTED:
        return (f"Compacted {result.messages} messages into a summary: context {result.tokens_before:,} -> "
                f"{result.tokens_after:,} tokens. Nothing was deleted.")
    if result.outcome is Outcome.BUSY:
        return "A compaction of this conversation is already running."
    if result.outcome is Outcome.NOT_NEEDED:
        return "Nothing to compact yet."
    return "Compaction failed; the conversation is unchanged. Try again later."


def safe_cut(messages: Sequence[Message], want: int) -> int:
    """The index to cut at, at most ``want``: the kept part never starts with tool results
    (their call would be summarised away), so the cut moves earlier past them."""
    cut = max(0, min(want, len(messages)))
    while 0 < cut < len(messages) and messages[cut].role is Role.TOOL:
        cut -= 1
    return cut


def summary_message(text: str) -> Message:
    return Message.user(f"{SUMMARY_HEADER}\n\n{text.strip()}")


def is_summary(message: Message) -> bool:
    return message.role is Role.USER and message.text.startswith(SUMMARY_HEADER)


def should_compact(live_messages: int, prompt_tokens: int, window: int, s: CompactionSettings) -> bool:
    """After a run: too many live messages, or the last prompt used too much of the window."""
    if not s.enabled or live_messages <= s.keep_last:
        return False
    return live_messages > s.trigger_messages or (window > 0 and prompt_tokens >= s.trigger_ratio * window)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def transcript_lines(messages: Sequence[Message]) -> list[str]:
    """The messages as plain text for the summariser, big tool output clipped."""
    lines: list[str] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart) and p.text.strip():
                who = "Assistant" if m.role is Role.ASSISTANT else "User"
                if is_summary(m):
                    who, text = "Earlier summary", p.text[len(SUMMARY_HEADER):].strip()
                else:
                    text = p.text
                lines.append(f"{who}: {_clip(text, TEXT_CHARS)}")
            elif isinstance(p, ToolCall):
                lines.append(f"Assistant called {p.name}({_clip(p.arguments, 500)})")
            elif isinstance(p, ToolResult):
                lines.append(f"Tool result{' (error)' if p.is_error else ''}: {_clip(p.content, RESULT_CHARS)}")
            elif isinstance(p, ImagePart):
                lines.append("User: [an image]")
    return lines


def transcript(messages: Sequence[Message], budget: int, model: str) -> str:
    """The transcript within ``budget`` tokens: the oldest lines go first when it is too long
    (an earlier summary, always the first line, is kept)."""
    lines = transcript_lines(messages)
    counts = [tokens.count_text(line, model) + 1 for line in lines]
    total = sum(counts)
    keep_first = 1 if messages and is_summary(messages[0]) and lines else 0
    start = keep_first
    while total > budget and start < len(lines) - 1:
        total -= counts[start]
        start += 1
    kept = lines[:keep_first] + (["[… older messages left out …]"] if start > keep_first else []) + lines[start:]
    return "\n\n".join(kept)


def fit_newest(messages: Sequence[Message], budget: int, model: str) -> list[Message]:
    """The newest messages whose tokens fit ``budget``, pairing repaired."""
    total, start = 0, len(messages)
    while start > 0:
        n = tokens.count_messages([messages[start - 1]], model)
        if total + n > budget:
            break
        total += n
        start -= 1
    return repair_pairing(messages[start:])


# --------------------------------------------------------------------------- the compactor


FlushPrompt = Callable[[], str]  # the minimal system prompt of the session's workspace
FLUSH_WRITERS = frozenset({"write_file", "edit_file"})  # without one of them the flush cannot save anything


class Compactor:
    """Summaries and memory flushes for one agent; one compaction per session at a time."""

    def __init__(self, route: Route, store: CompactingStore, tools: ToolRegistry, *, settings: CompactionSettings,
                 redactor: Redactor, meter: Meter | None) -> None:
        self._store, self._meter, self.settings = store, meter, settings
        self._files = ToolRegistry(t for t in tools if t.category is ToolCategory.FILE)
        self._redactor = redactor
        self._busy: set[str] = set()
        self._on(route)

    def using(self, route: Route) -> Compactor:
        """This compactor on ``route``'s model (a conversation's): the same store and tools, and
        the same one-compaction-per-session rule (the busy set is shared)."""
        other = copy.copy(self)
        other._on(route)
        return other

    def _on(self, route: Route) -> None:
        spec = route.spec
        self._provider, self._cost = route.provider, route.cost
        self._model, self._window, self._max_tokens = spec.model, spec.context_window, spec.max_tokens

    def busy(self, session_key: str) -> bool:
        return session_key in self._busy

    def flush_tools(self, policy: ToolPolicy | None) -> ToolRegistry:
        """The file tools the memory flush may use: exactly those the run's ``policy`` permits."""
        return self._files.restricted(policy)

    async def summarize(self, messages: Sequence[Message], trace: TraceBuilder) -> str:
        """One summary of ``messages`` (an earlier summary among them is folded in); raises
        ``ProviderError`` or ``TimeoutError``; the LLM call is a span of ``trace``."""
        s = self.settings
        budget = max(1_000, int(self._window * 0.6) - s.summary_max_tokens)
        text = transcript(messages, budget, self._model)
        request = ChatRequest(self._model, SUMMARY_SYSTEM,
                              (Message.user(f"Summarise this conversation:\n\n{text}"),),
                              max_tokens=s.summary_max_tokens, temperature=s.temperature)
        started = time.time()
        try:
            async with asyncio.timeout(s.summary_timeout):
                completed = await complete(self._provider, request)
        except (ProviderError, TimeoutError):
            trace.llm(self._model, started, Usage(), 0.0, is_error=True, preview="summary")
            raise
        model = completed.model or self._model
        trace.llm(model, started, completed.usage, self._cost(model, completed.usage), preview=completed.message.text)
        summary = completed.message.text.strip()
        if not summary:
            raise ProviderError("the summary came back empty", provider=self._provider.name)
        return summary

    async def compact_in_memory(self, messages: Sequence[Message], trace: TraceBuilder,
                                session_key: str) -> tuple[Message, int] | None:
        """Mid-loop: a summary of the oldest ~70 % of ``messages`` and how many it covers;
        None when there is nothing to cut or the summary failed (logged)."""
        cut = safe_cut(messages, int(len(messages) * MID_LOOP_SHARE))
        if cut < 2:
            return None
        await tokens.ready(self._model)
        try:
            text = await self.summarize(messages[:cut], trace)
        except (ProviderError, TimeoutError) as exc:
            log.warning("mid-loop compaction failed session=%s: %s", session_key, exc or "timeout")
            return None
        except Exception:  # a bug here must not fail the run: it goes on uncompacted
            log.exception("mid-loop compaction failed session=%s", session_key)
            return None
        log.info("mid-loop compaction session=%s: %d of %d messages summarised", session_key, cut, len(messages))
        return summary_message(text), cut

    async def compact(self, session: Session, *, run_id: str, ctx: ToolContext, flush_prompt: FlushPrompt,
                      agent_id: str) -> CompactionResult:
        """Flush memory (with ``ctx``, the workspace's tool context), then summarise all but the
        last ``keep_last`` messages and save the cut. Never raises but for cancellation."""
        key = session.key
        if key in self._busy:
            log.info("compaction already running session=%s; skipped", key)
            return CompactionResult(Outcome.BUSY)
        self._busy.add(key)
        try:
            return await self._compact(session, run_id, ctx, flush_prompt, agent_id)
        except asyncio.CancelledError:
            log.info("compaction cancelled session=%s run=%s; history unchanged", key, run_id)
            raise
        except Exception:  # a bug must not take the session down with it
            log.exception("compaction failed session=%s run=%s", key, run_id)
            return CompactionResult(Outcome.FAILED)
        finally:
            self._busy.discard(key)

    async def _compact(self, session: Session, run_id: str, ctx: ToolContext, flush_prompt: FlushPrompt,
                       agent_id: str) -> CompactionResult:
        s, key = self.settings, session.key
        live = await self._store.live_messages(session)
        previous = await self._store.summary(session)
        messages = [m.message for m in live]
        cut = safe_cut(messages, len(messages) - s.keep_last)
        if cut < 1:
            return CompactionResult(Outcome.NOT_NEEDED)
        await tokens.ready(self._model)
        old = ([summary_message(previous.text)] if previous else []) + messages[:cut]
        before = tokens.count_messages(old + messages[cut:], self._model)
        bill = Bill(ctx.payers, self._meter)
        trace = TraceBuilder(run_id, key, agent_id, self._model, self._redactor, bill=bill)
        flushed = self._may_flush(ctx) and await self._flush(messages, ctx, flush_prompt(), trace)
        try:
            text = await self.summarize(old, trace)
        except (ProviderError, TimeoutError) as exc:
            log.warning("compaction failed session=%s run=%s: %s; history unchanged", key, run_id,
                        exc or "summary timed out")
            calls = await self._record(session, run_id, trace, bill, "failed", str(exc) or "summary timed out")
            return CompactionResult(Outcome.FAILED, flushed=flushed, calls=calls)
        after = tokens.count_messages([summary_message(text), *messages[cut:]], self._model)
        replaced = cut + (previous.messages if previous else 0)
        summary = Summary(text, live[cut - 1].id, replaced, before, after, run_id, time.time())
        saved = await self._store.save_summary(session, summary)
        calls = await self._record(session, run_id, trace, bill, "compaction" if saved else "failed",
                                   None if saved else "a later summary was saved meanwhile")
        if not saved:
            return CompactionResult(Outcome.BUSY, flushed=flushed, calls=calls)
        log.info("compacted session=%s run=%s: %d messages, %d -> %d tokens", key, run_id, cut, before, after)
        return CompactionResult(Outcome.COMPACTED, replaced, before, after, flushed, calls=calls)

    def _may_flush(self, ctx: ToolContext) -> bool:
        """Whether ``memory_flush`` covers this chat and the run's policy leaves a file tool that writes."""
        mode = self.settings.memory_flush
        if not (mode == "all" or (mode == "dm" and ctx.chat_type == "dm")):
            return False
        if any(name in FLUSH_WRITERS for name in self.flush_tools(ctx.tool_policy).names()):
            return True
        log.info("memory flush skipped session=%s: the tool policy leaves no file tool that writes", ctx.session_key)
        return False

    async def _flush(self, history: Sequence[Message], ctx: ToolContext, system: str, trace: TraceBuilder) -> bool:
        """The memory flush turn; True when it finished. Failures and timeouts are logged."""
        s = self.settings
        day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        budget = int(self._window * 0.6) - self._max_tokens
        messages = [*fit_newest(history, budget, self._model), Message.user(FLUSH_INSTRUCTION.format(day=day))]
        files = self.flush_tools(ctx.tool_policy)
        specs = files.specs()
        try:
            async with asyncio.timeout(s.flush_timeout):
                for _ in range(s.flush_iterations):
                    started = time.time()
                    completed = await complete(self._provider, ChatRequest(self._model, system, tuple(messages), specs,
                                                                           self._max_tokens))
                    trace.llm(completed.model or self._model, started, completed.usage,
                              self._cost(completed.model or self._model, completed.usage),
                              preview=completed.message.text)
                    messages.append(completed.message)
                    calls = completed.message.tool_calls
                    if not calls:
                        break
                    results = await files.execute(calls, ctx)
                    messages.append(Message(Role.TOOL, tuple(results)))
                else:
                    log.info("memory flush stopped at %d iterations session=%s", s.flush_iterations, ctx.session_key)
        except (ProviderError, TimeoutError) as exc:
            log.warning("memory flush failed session=%s: %s", ctx.session_key, exc or "timed out")
            return False
        return True

    async def _record(self, session: Session, run_id: str, trace: TraceBuilder, bill: Bill, status: str,
                      error: str | None) -> TraceRecord | None:
        """The flush's and summary's tokens and cost, as a turn without messages; their record (None: none)."""
        if not trace.spans:
            return None
        record = trace.finish(status, len(trace.spans), error)
        await asyncio.shield(self._store.append_turn(
            Turn(session, run_id, (), trace.usage, trace.cost, self._model, (), record,
                 charges=bill.charges())))
        return record

