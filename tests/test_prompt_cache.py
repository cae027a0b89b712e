"""Prompt caching: breakpoints where Anthropic reads them again, a byte-stable prefix for
OpenAI, and cache tokens carried into usage, cost and traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.llm import Message, Role, ThinkingPart, ToolCall, ToolResult
from bot.providers.anthropic import request_params
from bot.providers.base import VOLATILE_OPEN, ChatRequest, Usage, with_volatile
from bot.providers.pricing import cost
from bot.tracing import format_traces
from tests.fakes.llm_server import Call, PromptCache, Reply, Tokens
from tests.test_compaction import Responder, make_harness

EPHEMERAL = {"type": "ephemeral"}


def marked(params: dict[str, Any]) -> list[tuple[int, str]]:
    """(message index, block type) of every block with a cache breakpoint."""
    return [(i, b["type"]) for i, m in enumerate(params["messages"]) for b in m["content"] if "cache_control" in b]


def breakpoints(params: dict[str, Any]) -> int:
    system = [b for b in params.get("system") or [] if "cache_control" in b]
    return len(system) + len(marked(params))


HISTORY = (Message.user("first"), Message.assistant("one"), Message.user("second"), Message.assistant("two"))


def test_system_and_history_prefix_are_breakpoints_and_the_volatile_part_comes_after() -> None:
    params = request_params(ChatRequest("claude-x", "stable system", (*HISTORY, Message.user("third")),
                                        volatile="## Current time\nnow"))
    assert params["system"] == [{"type": "text", "text": "stable system", "cache_control": EPHEMERAL}]
    assert marked(params) == [(3, "text")]  # "two": the last message before the new turn
    newest = params["messages"][4]["content"]
    assert newest[0] == {"type": "text", "text": "third"}
    assert newest[1]["text"].startswith(VOLATILE_OPEN) and "now" in newest[1]["text"]
    assert breakpoints(params) == 2


def test_a_turn_that_goes_on_with_tools_caches_its_tail_too_within_four_breakpoints() -> None:
    call = Message(Role.ASSISTANT, (ThinkingPart("hm", signature="s"), ToolCall("t1", "read_file", "{}")))
    result = Message(Role.TOOL, (ToolResult("t1", "content"),))
    params = request_params(ChatRequest("claude-x", "sys", (*HISTORY, Message.user("third"), call, result)))
    assert marked(params) == [(3, "text"), (6, "tool_result")]
    assert breakpoints(params) == 3 <= 4


def test_thinking_blocks_never_carry_a_breakpoint() -> None:
    thinking_only = Message(Role.ASSISTANT, (ThinkingPart("hm", signature="s"), ToolCall("t1", "f", "{}")))
    params = request_params(ChatRequest("claude-x", "", (Message.user("a"), thinking_only,
                                                         Message(Role.TOOL, (ToolResult("t1", "r"),)),
                                                         Message.assistant("b"), Message.user("c"))))
    assert marked(params) == [(3, "text")]
    assert "system" not in params
    first = request_params(ChatRequest("claude-x", "sys", (Message.user("only"),)))
    assert marked(first) == []  # nothing before the new turn to cache but the system prompt


def test_the_volatile_part_goes_to_the_newest_user_turn_only() -> None:
    msgs = (*HISTORY, Message.user("third"), Message(Role.ASSISTANT, (ToolCall("t", "f", "{}"),)),
            Message(Role.TOOL, (ToolResult("t", "r"),)))
    out = with_volatile(msgs, "TIME")
    assert out[:4] == msgs[:4] and out[5:] == msgs[5:]
    assert out[4].text == "third" + VOLATILE_OPEN + "TIME" + "\n</chatgate-context>"
    assert with_volatile(msgs, "") is msgs


def test_cache_tokens_are_priced() -> None:
    m = 1_000_000
    usage = Usage(input_tokens=m, output_tokens=0, cache_read_tokens=800_000, cache_write_tokens=100_000)
    # Sonnet 4.5: input 3.00, cache read 0.30, cache write 3.75 per million
    assert cost("claude-sonnet-4-5", usage) == pytest.approx(0.1 * 3.00 + 0.8 * 0.30 + 0.1 * 3.75)
    assert cost("claude-sonnet-4-5", usage) < cost("claude-sonnet-4-5", Usage(input_tokens=m))


def test_fake_prompt_cache_reads_what_an_earlier_request_wrote() -> None:
    cache = PromptCache()
    first = request_params(ChatRequest("c", "s" * 4000, (*HISTORY, Message.user("third"))))
    t1 = cache.use(first)
    assert t1.cache_read == 0 and t1.cache_write > 1000
    second = request_params(ChatRequest("c", "s" * 4000, (*HISTORY, Message.user("third"), Message.assistant("3"),
                                                          Message.user("fourth"))))
    t2 = cache.use(second)
    assert t2.cache_read >= t1.cache_write and t2.cache_read + t2.cache_write <= t2.input


@pytest.mark.parametrize("provider_name", ["openai", "anthropic"])
async def test_the_prefix_is_byte_stable_from_turn_to_turn(tmp_path: Path, provider_name: str) -> None:
    async for h in make_harness(tmp_path, provider_name, responder=Responder(tool_every=2)):
        for i in range(1, 5):
            await h.run(f"turn {i}")
        turns = [r.body for r in h.llm.requests]
        for before, after in zip(turns, turns[1:], strict=False):
            assert after.get("tools") == before.get("tools")
            assert after.get("system") == before.get("system")
            # everything before the earlier request's newest user turn is sent again unchanged
            old = before["messages"]
            newest = max(i for i, m in enumerate(old) if m["role"] == "user" and _has_text(m))
            stable = [_without_marks(m) for m in old[:newest]]
            assert [_without_marks(m) for m in after["messages"][:newest]] == stable


def _has_text(message: dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, str) or any(b["type"] == "text" for b in content)


def _without_marks(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, list):
        content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return {**message, "content": content}


async def test_cache_tokens_reach_usage_cost_and_traces(tmp_path: Path) -> None:
    async for h in make_harness(tmp_path, "anthropic"):
        h.llm.script(Reply.tool_calls([Call("list_files", {})], usage=Tokens(2_000, 10, 1_500, 400)),
                     Reply.text("done", usage=Tokens(2_100, 5, 1_900, 100)))
        _, result = await h.run("hello")
        assert result.usage == Usage(4_100, 15, 3_400, 500)
        session = await h.store.session(h.key())
        totals = await h.store.usage(session)
        assert (totals.cache_read_tokens, totals.cache_write_tokens) == (3_400, 500)
        [trace] = await h.store.traces(session.key)
        assert (trace.cache_read_tokens, trace.cache_write_tokens) == (3_400, 500)
        assert [(s.cache_read_tokens, s.cache_write_tokens) for s in trace.spans if s.kind == "llm"] == [
            (1_500, 400), (1_900, 100)]
        shown = format_traces([trace])
        assert "(3400 cached, 500 to cache)" in shown and "(1500 cached, 400 to cache)" in shown


async def test_with_anthropic_most_of_a_long_conversation_is_read_from_cache(tmp_path: Path) -> None:
    async for h in make_harness(tmp_path, "anthropic", responder=Responder(tool_every=3)):
        h.llm.prompt_cache = PromptCache()
        for i in range(1, 13):
            await h.run(f"turn {i}")
        later = [h.llm.reported[r.index] for r in h.llm.requests[4:]]
        assert len(later) > 10
        assert sum(u.cache_read for u in later) / sum(u.input for u in later) > 0.7
