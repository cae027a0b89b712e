"""Toolsets: tools offered per run (MCP servers and skills plug in here), narrowed by the run's policy."""

from __future__ import annotations

import json
from pathlib import Path

from bot.agent.events import EventBus
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunStatus
from bot.app import BUILTIN_TEMPLATES
from bot.conversation import Conversation
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.store.sqlite import SQLiteStore
from bot.tools import ToolCategory, ToolContext, builtin_registry, tool
from bot.tools.policy import ToolPolicy, ToolRules
from bot.tools.toolset import NOTHING, Offer
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, FakeLLM, Reply


@tool(category=ToolCategory.OTHER)
async def whoami(ctx: ToolContext) -> str:
    """Say whom the run acts for."""
    return f"you are {ctx.user_id} in {ctx.conversation.chat_id}"


class Granted:
    """Offers ``whoami`` to u1 only, with a prompt section."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def offer(self, ctx: ToolContext) -> Offer:
        self.asked.append(ctx.user_id)
        return Offer((whoami,), "## Extra tools\nwhoami tells who you are.") if ctx.user_id == "u1" else NOTHING


async def _run(tmp_path: Path, user: str, policy: ToolPolicy | None, calls: list[Call]) -> tuple[FakeLLM, Granted]:
    toolset = Granted()
    async with FakeLLM() as llm, SQLiteStore(tmp_path / "db.sqlite") as store:
        provider = make_provider("openai", api_key="sk-test", base_url=llm.openai_base_url, timeout=10, max_retries=1)
        agent = Agent(AgentSettings("main", "openai", "fake-model"), provider, store, EventBus(), builtin_registry(),
                      Workspaces(tmp_path / "ws", BUILTIN_TEMPLATES), lambda m, u: 0.0, toolsets=[toolset])
        llm.script(Reply.tool_calls(calls), Reply.text("done"))
        msg = InboundMessage("test", "bot", user, ChatType.DM, Sender(user, "Ann"), "who am I?", "m1")
        key = f"agent:main:test:dm:{user}"
        result = await agent.complete(RunRequest("r1", await store.session(key), Conversation.of_key(key), (msg,),
                                                 user_id=user, tool_policy=policy))
        await provider.aclose()
        assert result.status is RunStatus.COMPLETED
        return llm, toolset


def _offered(llm: FakeLLM) -> list[str]:
    return [t["function"]["name"] for t in llm.requests[0].body.get("tools", [])]


async def test_an_offered_tool_reaches_the_model_and_runs(tmp_path: Path) -> None:
    llm, toolset = await _run(tmp_path, "u1", None, [Call("whoami", {}, id="c1")])
    assert toolset.asked == ["u1"]  # once per run
    assert "whoami" in _offered(llm) and "read_file" in _offered(llm)
    assert "## Extra tools" in json.dumps(llm.requests[0].body["messages"][0])
    assert "you are u1 in u1" in json.dumps(llm.requests[1].body["messages"])


async def test_a_tool_not_offered_is_unknown(tmp_path: Path) -> None:
    llm, _ = await _run(tmp_path, "u2", None, [Call("whoami", {}, id="c1")])
    assert "whoami" not in _offered(llm)
    assert "## Extra tools" not in json.dumps(llm.requests[0].body["messages"][0])
    assert "unknown tool 'whoami'" in json.dumps(llm.requests[1].body["messages"])


async def test_the_policy_narrows_offered_tools_as_it_does_built_ins(tmp_path: Path) -> None:
    policy = ToolPolicy((ToolRules("tools", deny=("who*",)),))
    llm, _ = await _run(tmp_path, "u1", policy, [Call("whoami", {}, id="c1")])
    assert "whoami" not in _offered(llm)
    assert "whoami is not available in this chat (denied by tools.deny)" in json.dumps(llm.requests[1].body["messages"])
