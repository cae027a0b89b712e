"""spawn: sub-agents driven through the real agent loop against the fake LLM server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.agent.events import EventBus
from bot.agent.guard import GuardMode
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunResult
from bot.agent.prompt import PERSONA_REMINDER
from bot.agent.spawn import READ_ONLY_TOOLS, SpawnLimits, SubAgents, spawn_tool
from bot.app import BUILTIN_TEMPLATES
from bot.config.tools import WebFetchConfig
from bot.conversation import Conversation
from bot.llm import Role, ToolCall, ToolResult
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.providers.base import Usage
from bot.store.sqlite import SQLiteStore
from bot.tools import ToolContext, ToolPolicy, ToolRegistry, ToolRules, builtin_registry
from bot.tools.base import SubAgentRun
from bot.tools.web import web_fetch_tool
from bot.tracing import Redactor, SpanKind, TraceBuilder
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, FakeLLM, Reply, Tokens

KEY = "agent:main:test:dm:u1"


def cost(model: str, usage: Usage) -> float:
    return usage.input_tokens * 1e-6 + usage.output_tokens * 2e-6


@dataclass
class Spawning:
    llm: FakeLLM
    store: SQLiteStore
    agent: Agent
    subagents: SubAgents
    workspaces: Workspaces
    tools: ToolRegistry

    async def run(self, text: str = "go") -> RunResult:
        msg = InboundMessage("test", "bot", "u1", ChatType.DM, Sender("u1", "Ann"), text, "m1")
        session = await self.store.session(KEY)
        inbound = await self.store.record_inbound(msg, KEY)
        assert inbound is not None
        return await self.agent.complete(RunRequest("parent-run", session, Conversation.of_key(KEY), (msg,), (inbound,)))

    async def results(self) -> list[ToolResult]:
        history = await self.store.history(await self.store.session(KEY))
        return [r for m in history if m.role is Role.TOOL for r in m.tool_results]

    def child_requests(self) -> list[Any]:
        return [r for r in self.llm.requests if "spawn" not in tool_names(r)]


def tool_names(request: Any) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def build(llm: FakeLLM, store: SQLiteStore, root: Path, provider: Any, limits: SpawnLimits) -> Spawning:
    settings = AgentSettings("main", "openai", "fake-model", max_iterations=6, guard=GuardMode.OFF)
    workspaces = Workspaces(root, BUILTIN_TEMPLATES)
    tools = builtin_registry()
    subagents = SubAgents(settings, provider, store, tools, workspaces, cost, Redactor(), limits)
    tools.register(spawn_tool(subagents))
    agent = Agent(settings, provider, store, EventBus(), tools, workspaces, cost, Redactor())
    return Spawning(llm, store, agent, subagents, workspaces, tools)


@pytest.fixture
async def spawning(llm: FakeLLM, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Spawning]:
    limits = getattr(request, "param", SpawnLimits())
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        provider = make_provider("openai", api_key="sk-test", base_url=llm.openai_base_url, timeout=10, max_retries=0)
        try:
            yield build(llm, store, tmp_path / "ws", provider, limits)
        finally:
            await provider.aclose()


def spawns(*tasks: str) -> Reply:
    return Reply.tool_calls([Call("spawn", {"task": t}, id=f"s{i}") for i, t in enumerate(tasks)])


async def test_children_run_at_once_with_read_only_tools_and_the_minimal_prompt(spawning: Spawning) -> None:
    slow = [Reply.text(f"answer {i}", chunk_size=3, delay=0.3) for i in range(3)]  # a second or more each
    spawning.llm.script(spawns("task A", "task B", "task C"), *slow, Reply.text("all done"))
    started = time.monotonic()
    result = await spawning.run()
    elapsed = time.monotonic() - started
    assert result.text == "all done"
    durations = []
    for n in (1, 2, 3):
        [trace] = await spawning.store.traces(f"{KEY}:sub:{n}")
        durations.append(trace.ended_at - trace.started_at)
    assert min(durations) > 0.8  # each child streams for about a second...
    assert elapsed < 1.5 * max(durations), (elapsed, durations)  # ...and together they took little more than one
    children = spawning.child_requests()
    assert len(children) == 3
    for request in children:
        # web_fetch is not registered; read_skill and skill_search come with skills (none here)
        assert set(tool_names(request)) == set(READ_ONLY_TOOLS) - {"web_fetch", "read_skill", "skill_search"}
        system = request.body["messages"][0]["content"]
        assert PERSONA_REMINDER not in system, system
        assert "working on one task" in system
    parent_system = spawning.llm.requests[0].body["messages"][0]["content"]
    assert PERSONA_REMINDER in parent_system
    # the task is the child's user message (the runtime context follows it)
    assert sorted(r.body["messages"][-1]["content"].split("\n")[0] for r in children) == ["task A", "task B", "task C"]
    results = await spawning.results()
    assert sorted(r.content for r in results) == ["answer 0", "answer 1", "answer 2"]
    for n in (1, 2, 3):  # each child has its own session, with its task and answer
        history = await spawning.store.history(await spawning.store.session(f"{KEY}:sub:{n}"))
        assert [m.role for m in history] == [Role.USER, Role.ASSISTANT]


async def test_a_child_cannot_spawn(spawning: Spawning) -> None:
    spawning.llm.script(spawns("look around"), Reply.tool_calls([Call("spawn", {"task": "deeper"}, id="deep")]),
                        Reply.text("child done"), Reply.text("parent done"))
    result = await spawning.run()
    assert result.text == "parent done"
    child = await spawning.store.history(await spawning.store.session(f"{KEY}:sub:1"))
    [refused] = [r for m in child for r in m.tool_results]
    assert refused.is_error and refused.content.startswith("spawn is not available in this chat")
    ctx = ToolContext(Path("."), Conversation.of_key(f"{KEY}:sub:1"), "r", "main", "u1")
    [direct] = await spawning.tools.execute([ToolCall("d", "spawn", json.dumps({"task": "x"}))], ctx)
    assert direct.is_error and "a sub-agent cannot start sub-agents" in direct.content


async def test_at_most_five_children_per_run(spawning: Spawning) -> None:
    spawning.llm.script(spawns(*[f"task {i}" for i in range(6)]))  # children and the parent then echo
    await spawning.run()
    results = await spawning.results()
    refused = [r for r in results if r.is_error]
    assert len(results) == 6 and len(refused) == 1 and "at most 5 sub-agents per request" in refused[0].content
    assert len(spawning.child_requests()) == 5


@pytest.mark.parametrize("spawning", [SpawnLimits(max_concurrent=2)], indirect=True)
async def test_the_process_wide_cap_holds_children_back(spawning: Spawning) -> None:
    spawning.llm.script(spawns("a", "b", "c", "d"), *[Reply.text("ok", delay=0.1) for _ in range(4)],
                        Reply.text("done"))
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, spawning.subagents.active)
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch())
    try:
        result = await spawning.run()
    finally:
        watcher.cancel()
    assert result.text == "done" and peak == 2 and len(spawning.child_requests()) == 4


async def test_stop_of_the_parent_closes_every_childs_stream(spawning: Spawning) -> None:
    spawning.llm.script(spawns("a", "b", "c"), Reply.hang(), Reply.hang(), Reply.hang())
    task = asyncio.create_task(spawning.run())
    await spawning.llm.wait_for_requests(4)
    await asyncio.sleep(0.05)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    children = [r for r in spawning.llm.requests[1:]]
    await asyncio.wait_for(asyncio.gather(*(r.disconnected.wait() for r in children)), 2)
    assert time.monotonic() - started < 1.0 and spawning.subagents.active == 0
    results = await spawning.results()  # the parent's history stays valid
    assert [r.content for r in results] == ["Tool execution cancelled by user"] * 3


async def test_cost_and_a_span_go_to_the_parent(spawning: Spawning) -> None:
    spawning.llm.script(Reply.text("child answer", usage=Tokens(input=100, output=10)))
    seen: list[SubAgentRun] = []
    trace = TraceBuilder("parent-run", KEY, "main", "fake-model")

    def charge(child: SubAgentRun) -> None:
        seen.append(child)
        trace.sub_agent(child.session_key, child.started, child.usage, child.cost, is_error=False,
                        output=child.text, seconds=child.seconds)

    ctx = ToolContext(spawning.workspaces.root / "test-u1", Conversation.of_key(KEY), "parent-run", "main", "u1",
                      on_sub_agent=charge)
    [result] = await spawning.tools.execute([ToolCall("s", "spawn", json.dumps({"task": "sum it"}))], ctx)
    assert result.content == "child answer"
    [child] = seen
    assert child.session_key == f"{KEY}:sub:1" and child.usage.input_tokens == 100 and child.usage.output_tokens == 10
    assert child.cost == pytest.approx(100e-6 + 20e-6)
    record = trace.finish("completed", 1)
    assert record.input_tokens == 100 and record.cost == pytest.approx(child.cost)
    [span] = record.spans
    assert span.kind is SpanKind.AGENT and span.name == f"{KEY}:sub:1" and span.preview == "child answer"


def test_children_tools_follow_the_parents_policy(spawning: Spawning) -> None:
    spawning.tools.register(web_fetch_tool(WebFetchConfig()))
    skills = ("read_skill", "skill_search")  # offered by the skills toolset, not registered here
    assert spawning.subagents.child_tools(None).names() == tuple(n for n in READ_ONLY_TOOLS if n not in skills)
    policy = ToolPolicy((ToolRules("tools", deny=("web_fetch", "memory_*")),))
    assert spawning.subagents.child_tools(policy).names() == ("read_file", "list_files", "search_files")
