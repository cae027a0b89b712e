"""What the MCP tests share: the demo server's config, an HTTP one on a free port, an agent
with the hub as its toolset driven against the fake LLM."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.events import EventBus
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunResult
from bot.agent.spawn import SubAgents, spawn_tool
from bot.app import BUILTIN_TEMPLATES
from bot.backoff import Backoff
from bot.conversation import Conversation
from bot.mcp.config import McpConfig
from bot.mcp.hub import McpHub
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.store.sqlite import SQLiteStore
from bot.tools import builtin_registry
from bot.tools.policy import ToolPolicy
from bot.workspace import Workspaces
from tests.fakes.llm_server import FakeLLM

DEMO = str(Path(__file__).resolve().parent / "demo.py")
FAST = Backoff(base=0.1, factor=2.0, cap=0.5)  # retries for tests that wait for a server to come back


def stdio(**settings: Any) -> dict[str, Any]:
    """The demo server over stdio, granted to everyone unless said otherwise."""
    return {"command": sys.executable, "args": [DEMO], "grant": "everyone", **settings}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def http_server(port: int, marks: Path | None = None, wait: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """The demo server over streamable HTTP on 127.0.0.1:port, killed on the way out."""
    env = {"PATH": "/usr/bin:/bin", **({"MARKS": str(marks)} if marks else {})}
    proc = subprocess.Popen([sys.executable, DEMO, "--http", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        if wait:
            deadline = time.monotonic() + 15
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert proc.poll() is None and time.monotonic() < deadline, "the HTTP demo server did not start"
                time.sleep(0.05)
        yield proc
    finally:
        proc.kill()
        proc.wait(5)


def config(servers: dict[str, dict[str, Any]], **rest: Any) -> McpConfig:
    return McpConfig.model_validate({"servers": servers, **rest})


async def wait_for(check: Any, timeout: float = 10.0, every: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(every)


@dataclass
class Bench:
    """An agent with the hub as its toolset, against the fake LLM, in a temporary directory."""

    llm: FakeLLM
    store: SQLiteStore
    hub: McpHub
    agent: Agent
    workspaces: Workspaces
    runs: int = 0
    asked: list[str] = field(default_factory=list)

    async def run(self, text: str = "go", *, user: str = "u1", group: str | None = None, owner: bool = False,
                  policy: ToolPolicy | None = None) -> RunResult:
        self.runs += 1
        chat_type = ChatType.GROUP if group else ChatType.DM
        msg = InboundMessage("test", "bot", group or user, chat_type, Sender(user, "Ann"), text, f"m{self.runs}")
        key = f"agent:main:test:group:{group}" if group else f"agent:main:test:dm:{user}"
        conv = Conversation.of_key(key)
        return await self.agent.complete(RunRequest(f"r{self.runs}", await self.store.session(key), conv, (msg,),
                                                    user_id=user, sender_is_owner=owner, tool_policy=policy,
                                                    payers=(f"test:{user}",)))

    def offered(self, index: int) -> list[str]:
        return [t["function"]["name"] for t in self.llm.requests[index].body.get("tools", [])]

    def results(self, index: int) -> list[dict[str, Any]]:
        """The tool messages the model was sent in request ``index``."""
        return [m for m in self.llm.requests[index].body["messages"] if m["role"] == "tool"]

    def result(self, index: int, call_id: str) -> str:
        found = [m["content"] for m in self.results(index) if m["tool_call_id"] == call_id]
        assert found, f"no result for {call_id}: {json.dumps(self.results(index))[:500]}"
        content: str = found[-1]  # the newest: a later request repeats the history
        return content


@asynccontextmanager
async def bench(llm: FakeLLM, tmp_path: Path, mcp: McpConfig, *, backoff: Backoff | None = None,
                sub_agents: bool = False, **hub: Any) -> AsyncIterator[Bench]:
    workspaces = Workspaces(tmp_path / "ws", BUILTIN_TEMPLATES)
    async with SQLiteStore(tmp_path / "db.sqlite") as store, \
            McpHub(mcp, log_dir=tmp_path / "mcp", backoff=backoff, **hub) as mcp_hub:
        provider = make_provider("openai", api_key="sk-test", base_url=llm.openai_base_url, timeout=10,
                                 max_retries=0)
        settings = AgentSettings("main", "openai", "fake-model", max_iterations=6)
        tools = builtin_registry()
        if sub_agents:
            tools.register(spawn_tool(SubAgents(settings, provider, store, tools, workspaces, lambda m, u: 0.0,
                                                toolsets=[mcp_hub])))
        agent = Agent(settings, provider, store, EventBus(), tools, workspaces, lambda m, u: 0.0, toolsets=[mcp_hub])
        try:
            yield Bench(llm, store, mcp_hub, agent, workspaces)
        finally:
            await provider.aclose()
