"""A test bed for Agent Skills: the real agent loop with the skills toolset, against the fake LLM.

Shared skills live in ``<tmp>/data/skills`` (the data directory's), workspaces under
``<tmp>/ws``; the shared folders' re-check reads ``bed.clock`` (``bed.advance()`` to see a change there).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.events import EventBus
from bot.agent.guard import GuardMode
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunResult
from bot.agent.spawn import SubAgents, spawn_tool
from bot.app import BUILTIN_TEMPLATES
from bot.conversation import Conversation
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.skills import SharedSkills, Skills, WorkspaceSkills
from bot.store.sqlite import SQLiteStore
from bot.tools import builtin_registry
from bot.tools.policy import ToolPolicy
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, FakeLLM, Received, Reply


def write_skill(folder: Path, name: str, description: str, body: str = "Do the thing step by step.\n", *,
                front: str | None = None) -> Path:
    """``folder/name/SKILL.md`` with that front matter (``front`` replaces it whole)."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    path = folder / name / "SKILL.md"
    if front is None:
        front = f"name: {name}\ndescription: {description}"
    path.write_text(f"---\n{front}\n---\n{body}")
    return path


@dataclass
class Bed:
    tmp: Path
    llm: FakeLLM
    agent: Agent
    store: SQLiteStore
    skills: Skills
    workspaces: Workspaces
    clock: list[float]  # what the shared folders' re-check reads as the time
    runs: int = 0
    results: list[RunResult] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # per run, the index of its first model request

    def advance(self, seconds: float = 1.0) -> None:
        """Move the clock on: the shared folders are checked again at the next run."""
        self.clock[0] += seconds

    @property
    def shared(self) -> Path:
        return self.tmp / "data" / "skills"

    def key(self, *, group: bool = False, user: str = "u1") -> str:
        return "agent:main:test:group:g1" if group else f"agent:main:test:dm:{user}"

    def workspace(self, *, group: bool = False, user: str = "u1") -> Path:
        return self.workspaces.dir_for(Conversation.of_key(self.key(group=group, user=user)))

    def own(self, *, group: bool = False, user: str = "u1") -> Path:
        """The workspace's skills/ folder (made)."""
        folder = self.workspace(group=group, user=user) / "skills"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    async def run(self, *replies: Reply, text: str = "hi", group: bool = False, user: str = "u1",
                  owner: bool = False, policy: ToolPolicy | None = None) -> RunResult:
        self.runs += 1
        self.starts.append(len(self.llm.requests))
        self.llm.script(*replies, Reply.text("done"))
        key = self.key(group=group, user=user)
        chat = "g1" if group else user
        msg = InboundMessage("test", "bot", chat, ChatType.GROUP if group else ChatType.DM, Sender(user, "Ann"), text,
                             f"m{self.runs}")
        result = await self.agent.complete(RunRequest(f"run{self.runs}", await self.store.session(key),
                                                      Conversation.of_key(key), (msg,), user_id=user,
                                                      sender_is_owner=owner, tool_policy=policy))
        self.results.append(result)
        return result

    async def call(self, tool: str, /, *, group: bool = False, user: str = "u1", owner: bool = False,
                   **arguments: Any) -> str:
        """One run in which the model calls ``tool`` once: the result it read."""
        before = len(self.llm.requests)
        await self.run(Reply.tool_calls([Call(tool, arguments, id="c1")]), group=group, user=user, owner=owner)
        return tool_results(self.llm.requests[before + 1])[-1]

    def request(self, run: int = -1) -> Received:
        """The first model request of a run (by order, -1: the last run)."""
        return self.llm.requests[self.starts[run]]


def system(request: Received) -> str:
    content = request.body["messages"][0]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def offered(request: Received) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def tool_results(request: Received) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m.get("role") == "tool"]


@asynccontextmanager
async def bed(tmp_path: Path, *, guard: GuardMode = GuardMode.WARN, inline_max: int = 15,
              in_workspaces: bool = True, spawn: bool = False) -> AsyncIterator[Bed]:
    """``spawn``: the agent has the spawn tool, its sub-agents the same skills."""
    (tmp_path / "data" / "skills").mkdir(parents=True, exist_ok=True)
    clock = [0.0]
    async with FakeLLM() as llm, SQLiteStore(tmp_path / "data" / "db.sqlite") as store:
        provider = make_provider("openai", api_key="sk-test", base_url=llm.openai_base_url, timeout=10, max_retries=1)
        shared = SharedSkills([tmp_path / "data" / "skills"], guard, clock=lambda: clock[0])
        skills = Skills(shared, WorkspaceSkills(guard) if in_workspaces else None, guard=guard, inline_max=inline_max)
        workspaces = Workspaces(tmp_path / "ws", BUILTIN_TEMPLATES)
        settings = AgentSettings("main", "openai", "fake-model", guard=guard)
        tools = builtin_registry()
        if spawn:
            tools.register(spawn_tool(SubAgents(settings, provider, store, tools, workspaces, lambda m, u: 0.0,
                                                toolsets=[skills])))
        agent = Agent(settings, provider, store, EventBus(), tools, workspaces, lambda m, u: 0.0, toolsets=[skills])
        try:
            yield Bed(tmp_path, llm, agent, store, skills, workspaces, clock)
        finally:
            await provider.aclose()


__all__ = ["Bed", "bed", "offered", "system", "tool_results", "write_skill"]
