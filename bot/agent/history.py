"""The history pipeline: stored messages -> what the model is sent.

Three pure stages, in order:
1. ``limit_turns``   keep the last N user turns with their assistant and tool messages;
2. ``prune_tool_results``  when the history is large against the context window, trim
   big tool results (soft), then clear old ones (hard), never in the protected zone;
3. ``repair_pairing``  make every tool call have exactly one result right after it, so
   a request is always valid after truncation, compaction or a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from bot.llm import Message, Role, ToolResult, text_size

MISSING_RESULT = "[Tool result missing -- session was compacted]"
CLEARED_RESULT = "[Old tool result content cleared]"
SOFT_TRIM_RATIO = 0.3  # of the context window: from here on big tool results are trimmed
HARD_CLEAR_RATIO = 0.5  # from here on old ones are cleared
SOFT_TRIM_OVER = 4_000  # chars: results longer than this are soft-trimmed
KEEP_HEAD = 1_500
KEEP_TAIL = 1_500
MIN_PRUNABLE_CHARS = 50_000  # hard clear only when tool results hold at least this much
KEEP_LAST_ASSISTANTS = 3


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A cheap, deterministic token estimate: ~4 characters per token, images ~1,000."""
    chars, images = text_size(messages)
    return chars // 4 + images * 1_000


def limit_turns(messages: Sequence[Message], max_turns: int) -> list[Message]:
    """The messages from the ``max_turns``-th last user message on."""
    if max_turns <= 0:
        return []
    users = [i for i, m in enumerate(messages) if m.role is Role.USER]
    return list(messages[users[-max_turns]:] if len(users) >= max_turns else messages)


def prune_tool_results(messages: Sequence[Message], context_window: int) -> list[Message]:
    """Two passes over tool results outside the protected zone (the first user message
    and everything from the last ``KEEP_LAST_ASSISTANTS`` assistant messages on)."""
    out = list(messages)
    if not out or context_window <= 0:
        return out
    if estimate_tokens(out) / context_window < SOFT_TRIM_RATIO:
        return out
    prunable = _prunable_indexes(out)
    prunable_chars = sum(len(r.content) for i in prunable for r in out[i].tool_results)  # before trimming

    for i in prunable:  # pass 1: soft trim, head and tail kept
        out[i] = _map_results(out[i], _soft_trim)
    if prunable_chars < MIN_PRUNABLE_CHARS or estimate_tokens(out) / context_window < HARD_CLEAR_RATIO:
        return out

    for i in prunable:  # pass 2: hard clear, oldest first, until under the threshold
        out[i] = _map_results(out[i], lambda r: replace(r, content=CLEARED_RESULT))
        if estimate_tokens(out) / context_window < HARD_CLEAR_RATIO:
            break
    return out


def repair_pairing(messages: Sequence[Message]) -> list[Message]:
    """Drop orphaned tool results, synthesise missing ones, keep results next to calls."""
    out: list[Message] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.role is Role.TOOL:  # a result with no call right before it: orphan
            i += 1
            continue
        calls = m.tool_calls if m.role is Role.ASSISTANT else ()
        out.append(m)
        i += 1
        if not calls:
            continue
        found: dict[str, ToolResult] = {}
        while i < len(messages) and messages[i].role is Role.TOOL:
            for r in messages[i].tool_results:
                found.setdefault(r.tool_call_id, r)
            i += 1
        results = tuple(found.get(c.id) or ToolResult(c.id, MISSING_RESULT, is_error=True) for c in calls)
        out.append(Message(Role.TOOL, results))
    return out


def build_history(messages: Sequence[Message], *, max_turns: int, context_window: int) -> list[Message]:
    return repair_pairing(prune_tool_results(limit_turns(messages, max_turns), context_window))


def _prunable_indexes(messages: list[Message]) -> list[int]:
    assistants = [i for i, m in enumerate(messages) if m.role is Role.ASSISTANT]
    protected_from = assistants[-KEEP_LAST_ASSISTANTS] if len(assistants) >= KEEP_LAST_ASSISTANTS else 0
    first_user = next((i for i, m in enumerate(messages) if m.role is Role.USER), -1)
    return [i for i, m in enumerate(messages[:protected_from]) if m.role is Role.TOOL and i != first_user]


def _map_results(message: Message, fn: Callable[[ToolResult], ToolResult]) -> Message:
    return Message(message.role, tuple(fn(p) if isinstance(p, ToolResult) else p for p in message.parts))


def _soft_trim(result: ToolResult) -> ToolResult:
    content = result.content
    if len(content) <= SOFT_TRIM_OVER or content == CLEARED_RESULT:
        return result
    cut = len(content) - KEEP_HEAD - KEEP_TAIL
    head, tail = content[:KEEP_HEAD], content[-KEEP_TAIL:]
    return replace(result, content=f"{head}\n...[{cut:,} characters trimmed]...\n{tail}")
