"""Compaction: the pure parts by table, then end to end with the real SDKs against the fake LLM."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from bot.agent.compaction import (
    FLUSH_INSTRUCTION,
    SUMMARY_HEADER,
    SUMMARY_SYSTEM,
    CompactionSettings,
    Outcome,
    safe_cut,
    should_compact,
    summary_message,
    transcript,
)
from bot.agent.events import EventBus
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunResult, RunStatus
from bot.app import BUILTIN_TEMPLATES
from bot.conversation import Conversation, conversation_for
from bot.llm import Message, Role, ToolCall, ToolResult
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.store.sqlite import SQLiteStore
from bot.tools import ToolCategory, ToolContext, builtin_registry, tool
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, FakeLLM, Reply, last_user_text

# ----------------------------------------------------------------------------- pure parts

U, A, T = Message.user("u"), Message.assistant("a"), Message(Role.TOOL, (ToolResult("c", "r"),))
AC = Message(Role.ASSISTANT, (ToolCall("c", "read_file", "{}"),))


@pytest.mark.parametrize(("messages", "want", "cut"), [
    ([U, A, U, A], 2, 2),
    ([U, AC, T, A], 2, 1),  # never keep a result without its call
    ([U, AC, T, AC, T, A], 4, 3),
    ([U, AC, T, A], 3, 3),
    ([AC, T], 1, 0),
    ([U, A], 5, 2),
    ([U, A], -1, 0),
])
def test_safe_cut(messages: list[Message], want: int, cut: int) -> None:
    assert safe_cut(messages, want) == cut


S = CompactionSettings(trigger_messages=50, trigger_ratio=0.75, keep_last=4)


@pytest.mark.parametrize(("live", "prompt", "window", "settings", "expected"), [
    (50, 0, 1000, S, False),
    (51, 0, 1000, S, True),
    (10, 749, 1000, S, False),
    (10, 750, 1000, S, True),
    (4, 10_000, 1000, S, False),  # nothing left to cut
    (51, 0, 1000, CompactionSettings(enabled=False), False),
])
def test_should_compact(live: int, prompt: int, window: int, settings: CompactionSettings, expected: bool) -> None:
    assert should_compact(live, prompt, window, settings) is expected


def test_transcript_clips_tool_output_and_keeps_the_earlier_summary_within_budget() -> None:
    big = Message(Role.TOOL, (ToolResult("c", "x" * 50_000),))
    text = transcript([summary_message("we met"), U, AC, big, A], 10_000, "gpt-4o")
    assert text.startswith("Earlier summary: we met") and "more characters]" in text and len(text) < 3_000
    many = [Message.user(f"message number {i} " + "word " * 50) for i in range(200)]
    short = transcript([summary_message("we met"), *many], 2_000, "gpt-4o")
    assert short.startswith("Earlier summary: we met\n\n[… older messages left out …]")
    assert "message number 199" in short and "message number 0 " not in short


# ----------------------------------------------------------------------------- end to end


@tool(category=ToolCategory.OTHER)
async def big_output(ctx: ToolContext, n: int) -> str:
    """Return a big tool output."""
    return f"output {n}: " + "data " * 4_000


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, list):
        return "".join(b.get("text", "") for b in system)
    if isinstance(system, str):
        return system
    first = (body.get("messages") or [{}])[0]
    return first.get("content", "") if first.get("role") in ("system", "developer") else ""


def kind_of(body: dict[str, Any]) -> str:
    if system_text(body) == SUMMARY_SYSTEM:
        return "summary"
    if last_user_text(body).startswith("[Memory flush]"):
        return "flush"
    return "turn"


def last_is_tool_result(body: dict[str, Any]) -> bool:
    last = (body.get("messages") or [{}])[-1]
    if last.get("role") == "tool":
        return True
    content = last.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def results_in_turn(body: dict[str, Any]) -> int:
    """Tool results since the newest user text."""
    count = 0
    for m in reversed(body.get("messages") or []):
        content = m.get("content")
        if m.get("role") == "tool":
            count += 1
        elif m.get("role") == "user":
            blocks = content if isinstance(content, list) else [{"type": "text"}]
            count += sum(b.get("type") == "tool_result" for b in blocks)
            if any(b.get("type") == "text" for b in blocks):
                break
    return count


@dataclass
class Responder:
    """Answers summaries with a numbered summary, flushes with NO_REPLY, turns with an echo
    (or, for ``turn N`` with N % tool_every == 0, ``calls`` big_output calls one after the
    other first)."""

    tool_every: int = 0
    calls: int = 1
    summaries: int = 0
    flushes: list[dict[str, Any]] = field(default_factory=list)
    flush_replies: list[Reply] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        kind = kind_of(body)
        if kind == "summary":
            self.summaries += 1
            return Reply.text(f"SUMMARY-{self.summaries}: the user counted turns.")
        if kind == "flush":
            self.flushes.append(body)
            return self.flush_replies.pop(0) if self.flush_replies else Reply.text("NO_REPLY")
        if last_is_tool_result(body):
            if results_in_turn(body) < self.calls:
                return Reply.tool_calls([Call("big_output", {"n": results_in_turn(body)})])
            return Reply.text("done with the tool")
        text = last_user_text(body)
        words = text.split()
        if self.tool_every and len(words) >= 2 and words[-2] == "turn" and int(words[-1]) % self.tool_every == 0:
            return Reply.tool_calls([Call("big_output", {"n": int(words[-1])})])
        return Reply.text("echo: " + text[-40:])


@dataclass
class Harness:
    agent: Agent
    store: SQLiteStore
    llm: FakeLLM
    responder: Responder
    root: Path
    runs: int = 0

    def inbound(self, text: str, chat_type: ChatType = ChatType.DM) -> InboundMessage:
        self.runs += 1
        chat = "u1" if chat_type is ChatType.DM else "g1"
        return InboundMessage("test", "bot", chat, chat_type, Sender("u1", "Ann"), text, f"m{self.runs}")

    def key(self, chat_type: ChatType = ChatType.DM) -> str:
        return f"agent:main:test:{chat_type.value}:{'u1' if chat_type is ChatType.DM else 'g1'}"

    async def run(self, text: str, chat_type: ChatType = ChatType.DM) -> tuple[RunRequest, RunResult]:
        msg = self.inbound(text, chat_type)
        session = await self.store.session(self.key(chat_type))
        request = RunRequest(f"run{self.runs}", session, Conversation.of_key(session.key), (msg,))
        return request, await self.agent.complete(request)

    async def turn(self, text: str, chat_type: ChatType = ChatType.DM):  # type: ignore[no-untyped-def]
        """A run, then the after-run compaction, as the gateway does it."""
        request, result = await self.run(text, chat_type)
        return result, await self.agent.compact_after(request, result)

    def kinds(self) -> list[str]:
        return [kind_of(r.body) for r in self.llm.requests]


async def make_harness(tmp_path: Path, provider_name: str, *, window: int = 100_000, history_turns: int = 40,
                       responder: Responder | None = None, **compaction: Any) -> AsyncIterator[Harness]:
    responder = responder or Responder()
    async with FakeLLM(strict_pairing=True, responder=responder) as llm, \
            SQLiteStore(tmp_path / "db.sqlite") as store:
        base_url = llm.openai_base_url if provider_name == "openai" else llm.anthropic_base_url
        provider = make_provider(provider_name, api_key="sk-test", base_url=base_url, timeout=10, max_retries=0)
        tools = builtin_registry()
        tools.register(big_output)
        settings = AgentSettings("main", provider_name, "fake-model", max_tokens=256, context_window=window,
                                 history_turns=history_turns,
                                 compaction=CompactionSettings(**{"trigger_messages": 50, **compaction}))
        agent = Agent(settings, provider, store, EventBus(), tools, Workspaces(tmp_path / "ws", BUILTIN_TEMPLATES),
                      lambda model, usage: usage.input_tokens * 1e-6)
        try:
            yield Harness(agent, store, llm, responder, tmp_path / "ws")
        finally:
            await provider.aclose()
        assert llm.pairing_problems == []


@pytest.fixture(params=["openai", "anthropic"])
def provider_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def h(tmp_path: Path, provider_name: str) -> AsyncIterator[Harness]:
    async for harness in make_harness(tmp_path, provider_name, trigger_messages=6, keep_last=2):
        yield harness


async def test_compaction_by_message_count_and_the_summary_opens_the_next_request(h: Harness) -> None:
    for i in range(3):
        _, outcome = await h.turn(f"turn {i}")
        assert outcome is None  # 2, 4, 6 live messages: not past 6
    result, outcome = await h.turn("turn 3")
    assert result.status is RunStatus.COMPLETED
    assert outcome is not None and outcome.outcome is Outcome.COMPACTED and outcome.messages == 6
    assert outcome.tokens_before > outcome.tokens_after > 0
    assert h.kinds()[-2:] == ["flush", "summary"]
    summary_request = h.llm.requests[-1].body
    assert "turn 0" in json.dumps(summary_request) and summary_request.get("temperature") == 0.3
    assert summary_request["max_tokens"] == 1024
    session = await h.store.session(h.key())
    assert await h.store.live_count(session) == 2  # the last turn kept
    assert len(await h.store.history(session)) == 2
    saved = await h.agent.last_compaction(session)
    assert saved is not None and saved.text.startswith("SUMMARY-1") and saved.messages == 6

    await h.run("turn 4")
    sent = h.llm.requests[-1].body
    assert kind_of(sent) == "turn"
    dumped = json.dumps(sent["messages"])
    assert SUMMARY_HEADER in dumped and "SUMMARY-1" in dumped
    assert "turn 3" in dumped and "turn 0" not in dumped


async def test_a_second_compaction_folds_the_first_summary_in(h: Harness) -> None:
    for i in range(8):
        await h.turn(f"turn {i}")
    assert h.responder.summaries == 2
    second = next(r.body for r in reversed(h.llm.requests) if kind_of(r.body) == "summary")
    assert "Earlier summary: SUMMARY-1" in json.dumps(second)
    session = await h.store.session(h.key())
    assert (await h.agent.last_compaction(session)).messages == 12  # type: ignore[union-attr]


async def test_compaction_by_ratio(tmp_path: Path) -> None:
    async for h in make_harness(tmp_path, "anthropic", window=3_000, trigger_messages=1_000, keep_last=1):
        request, result = await h.run("a long question " + "blah " * 2_500)
        assert result.prompt_tokens >= 0.75 * 3_000  # the usage the fake reported
        outcome = await h.agent.compact_after(request, result)
        assert outcome is not None and outcome.outcome is Outcome.COMPACTED


async def test_concurrent_triggers_compact_once(h: Harness) -> None:
    for i in range(3):
        await h.run(f"turn {i}")
    session = await h.store.session(h.key())
    msg = h.inbound("x")
    outcomes = await asyncio.gather(*(h.agent.compact(session, conversation_for(msg, "main"), run_id=f"c{i}") for i in range(3)))
    assert sorted(o.outcome for o in outcomes) == [Outcome.BUSY, Outcome.BUSY, Outcome.COMPACTED]
    assert h.kinds().count("summary") == 1 and h.kinds().count("flush") == 1


async def test_the_flush_writes_a_memory_file(h: Harness) -> None:
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    h.responder.flush_replies = [
        Reply.tool_calls([Call("write_file", {"path": f"memory/{day}.md", "content": "- Ann counts turns\n"})]),
        Reply.text("NO_REPLY"),
    ]
    for i in range(4):
        await h.turn(f"turn {i}")
    files = list(h.root.glob(f"*/memory/{day}.md"))
    assert len(files) == 1 and files[0].read_text() == "- Ann counts turns\n"
    flush = h.responder.flushes[0]
    assert FLUSH_INSTRUCTION.format(day=day)[:40] in json.dumps(flush)
    tools = {t.get("name") or t["function"]["name"] for t in flush["tools"]}
    assert tools == {"read_file", "write_file", "edit_file", "list_files", "search_files", "memory_search",
                     "memory_get"}  # file and memory tools only
    assert "helper of the chatgate agent" in system_text(flush)  # the minimal prompt


async def test_no_flush_in_a_group_unless_configured(h: Harness) -> None:
    for i in range(4):
        await h.turn(f"turn {i}", ChatType.GROUP)
    assert "summary" in h.kinds() and "flush" not in h.kinds()


async def test_a_failing_summary_leaves_history_intact(h: Harness) -> None:
    for i in range(3):
        await h.run(f"turn {i}")
    session = await h.store.session(h.key())
    before = await h.store.history(session)
    h.llm.script(Reply.text("NO_REPLY"), Reply.error(500))  # flush fine, summary fails
    outcome = await h.agent.compact(session, conversation_for(h.inbound("x"), "main"), run_id="c1")
    assert outcome.outcome is Outcome.FAILED
    assert await h.store.history(session) == before and await h.store.summary(session) is None
    traces = await h.store.traces(session.key)
    assert traces[-1].status == "failed" and traces[-1].run_id == "c1"  # its tokens are still counted
    _, result = await h.run("turn 9")  # and the session goes on
    assert result.status is RunStatus.COMPLETED


async def test_a_failing_flush_does_not_stop_the_summary(h: Harness) -> None:
    for i in range(3):
        await h.run(f"turn {i}")
    session = await h.store.session(h.key())
    h.llm.script(Reply.error(500))
    outcome = await h.agent.compact(session, conversation_for(h.inbound("x"), "main"), run_id="c1")
    assert outcome.outcome is Outcome.COMPACTED and not outcome.flushed


async def test_timeouts_leave_history_intact(tmp_path: Path) -> None:
    async for h in make_harness(tmp_path, "openai", trigger_messages=6, keep_last=2, flush_timeout=0.3,
                                summary_timeout=0.3):
        for i in range(3):
            await h.run(f"turn {i}")
        session = await h.store.session(h.key())
        before = await h.store.history(session)
        h.llm.script(Reply.hang(), Reply.hang())
        outcome = await h.agent.compact(session, conversation_for(h.inbound("x"), "main"), run_id="c1")
        assert outcome.outcome is Outcome.FAILED and not outcome.flushed
        assert await h.store.history(session) == before and await h.store.summary(session) is None


async def test_stop_cancels_a_compaction_and_changes_nothing(h: Harness) -> None:
    for i in range(3):
        await h.run(f"turn {i}")
    session = await h.store.session(h.key())
    before = await h.store.history(session)
    h.llm.script(Reply.text("NO_REPLY"), Reply.hang())
    task = asyncio.create_task(h.agent.compact(session, conversation_for(h.inbound("x"), "main"), run_id="c1"))
    await h.llm.wait_for_requests(len(h.llm.requests) + 2)
    assert h.agent.compactor.busy(session.key)
    task.cancel()  # what /stop does to the session's task
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(h.llm.requests[-1].disconnected.wait(), 2)  # the HTTP stream was closed
    assert await h.store.history(session) == before and await h.store.summary(session) is None
    assert not h.agent.compactor.busy(session.key)
    again = await h.agent.compact(session, conversation_for(h.inbound("x"), "main"), run_id="c2")
    assert again.outcome is Outcome.COMPACTED


async def test_mid_loop_compaction_summarises_in_memory(tmp_path: Path) -> None:
    responder = Responder(tool_every=1)
    async for h in make_harness(tmp_path, "anthropic", window=12_000, responder=responder, trigger_messages=1_000):
        for i in range(1, 4):
            _, result = await h.run(f"turn {i}")
            assert result.status is RunStatus.COMPLETED
        assert "summary" in h.kinds()
        after = h.kinds().index("summary") + 1
        follow = h.llm.requests[after].body
        assert kind_of(follow) == "turn" and SUMMARY_HEADER in json.dumps(follow["messages"])
        session = await h.store.session(h.key())
        assert await h.store.summary(session) is None  # in memory only
        assert await h.store.live_count(session) == 12  # every message stored


@pytest.mark.timeout(180)
async def test_300_turns_with_big_tool_outputs_never_break_pairing(tmp_path: Path, provider_name: str) -> None:
    # keep_last 2 after a tool turn (user, call, result, answer) would keep a result without its call
    responder = Responder(tool_every=2, calls=3)  # three big results in one run pass 75 % of the window
    async for h in make_harness(tmp_path, provider_name, window=16_000, responder=responder, keep_last=2):
        for i in range(300):
            result, _ = await h.turn(f"turn {i}")
            assert result.status is RunStatus.COMPLETED, result.error
        assert h.llm.pairing_problems == []
        h.llm.assert_tool_pairing()
        turns = [r for r in h.llm.requests if kind_of(r.body) == "turn"]
        sizes = [len(json.dumps(r.body["messages"])) for r in turns]
        assert max(sizes[150:]) < 16_000 * 4  # bounded by the window, long after the first compaction
        assert responder.summaries >= 5
        kinds = h.kinds()
        mid_loop = [i for i, k in enumerate(kinds) if k == "summary" and i + 1 < len(kinds)
                    and kind_of(h.llm.requests[i - 1].body) == "turn" and last_is_tool_result(h.llm.requests[i + 1].body)]
        assert mid_loop, "some compactions happen in the middle of a tool loop"


async def test_next_request_tokens_counts_the_system_prompt_and_the_summary(h: Harness) -> None:
    from bot import tokens

    session = await h.store.session(h.key())
    msg = h.inbound("x")
    empty = await h.agent.next_request_tokens(session, conversation_for(msg, "main"))
    assert empty > 500  # the system prompt and tool definitions, with no history at all
    for i in range(3):
        await h.run(f"turn {i}")
    grown = await h.agent.next_request_tokens(session, conversation_for(msg, "main"))
    history = await h.store.history(session)
    assert grown - empty == tokens.count_messages(history, "fake-model")
    await h.agent.compact(session, conversation_for(msg, "main"), run_id="c1")
    compacted = await h.agent.next_request_tokens(session, conversation_for(msg, "main"))
    kept = await h.store.history(session)
    summary = await h.agent.last_compaction(session)
    assert summary is not None
    assert compacted - empty == tokens.count_messages([summary_message(summary.text), *kept], "fake-model")


def test_status_and_compact_texts() -> None:
    from bot.agent.compaction import CompactionResult, compact_reply
    from bot.commands import MENU, NAMES, help_text, parse_command, status_text

    text = status_text(model="m", context_tokens=12_345, context_window=100_000, input_tokens=5, output_tokens=6,
                       cost=0.5, turns=3, running=False, queued=0, cache_read_tokens=4,
                       last_compaction=(40_000, 2_000))
    assert "Context: 12,345 of 100,000 tokens (12%)" in text
    assert "Last compaction: 40,000 -> 2,000 tokens" in text and "(4 from cache)" in text
    assert "compact" in NAMES and "compact" in dict(MENU) and "/compact" in help_text()
    assert parse_command("/compact") is not None
    assert "12 messages" in compact_reply(CompactionResult(Outcome.COMPACTED, 12, 900, 100))
    assert "unchanged" in compact_reply(CompactionResult(Outcome.FAILED))


async def test_history_reads_enough_pages_for_long_tool_turns(tmp_path: Path) -> None:
    from bot.store.base import Turn

    async for h in make_harness(tmp_path, "openai", history_turns=3, enabled=False):
        session = await h.store.session(h.key())
        for i in range(100):
            await h.store.append_turn(Turn(session, f"old{i}", (Message.user(f"old {i}"), Message.assistant("ok"))))
        for i in range(3):  # three turns of 2 + 2 * 8 messages: more than the first page holds
            calls = []
            for j in range(8):
                calls += [Message(Role.ASSISTANT, (ToolCall(f"c{i}-{j}", "list_files", "{}"),)),
                          Message(Role.TOOL, (ToolResult(f"c{i}-{j}", "x"),))]
            await h.store.append_turn(Turn(session, f"new{i}", (Message.user(f"new {i}"), *calls,
                                                                Message.assistant("done"))))
        await h.run("now")
        sent = json.dumps(h.llm.requests[-1].body["messages"])
        assert all(f"new {i}" in sent for i in (0, 1, 2)), sent
        assert '"old 99"' not in sent


async def test_a_failing_mid_loop_summary_does_not_fail_the_run(tmp_path: Path) -> None:
    class Failing(Responder):
        def __call__(self, body: dict[str, Any]) -> Reply:
            if kind_of(body) == "summary":
                self.summaries += 1
                return Reply.error(500)
            return super().__call__(body)

    responder = Failing(tool_every=1, calls=3)
    async for h in make_harness(tmp_path, "anthropic", window=12_000, responder=responder, trigger_messages=1_000):
        _, result = await h.run("turn 3")
        assert result.status is RunStatus.COMPLETED and result.text == "done with the tool"
        assert responder.summaries == 1  # tried once in this run, then went on uncompacted
