"""The file and memory tools driven through the real agent loop: the real SDK against the
fake LLM server asks for the calls, the loop runs them, the results go back to the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.agent.events import EventBus
from bot.agent.guard import GuardMode
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunResult
from bot.app import BUILTIN_TEMPLATES
from bot.conversation import Conversation
from bot.llm import ToolResult
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.store.sqlite import SQLiteStore
from bot.tools import ToolRegistry, builtin_registry, find
from bot.tracing import Redactor
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, FakeLLM, Reply


@dataclass
class Loop:
    llm: FakeLLM
    store: SQLiteStore
    root: Path
    provider: Any
    runs: int = 0

    def agent(self, tools: ToolRegistry | None = None) -> Agent:
        settings = AgentSettings("main", "openai", "fake-model", max_iterations=6, guard=GuardMode.OFF)
        return Agent(settings, self.provider, self.store, EventBus(), tools or builtin_registry(),
                     Workspaces(self.root, BUILTIN_TEMPLATES), lambda model, usage: 0.0, Redactor())

    async def run(self, *calls: Call, text: str = "go", chat_type: ChatType = ChatType.DM, user: str = "u1",
                  chat: str = "g1", tools: ToolRegistry | None = None) -> tuple[RunResult, list[ToolResult]]:
        """One run in which the model makes ``calls`` (one step each), then answers "done"."""
        self.runs += 1
        self.llm.script(*[Reply.tool_calls([c]) for c in calls], Reply.text("done"))
        chat_id = user if chat_type is ChatType.DM else chat
        msg = InboundMessage("test", "bot", chat_id, chat_type, Sender(user, "Ann"), text, f"m{self.runs}")
        key = f"agent:main:test:{chat_type.value}:{chat_id}"
        session = await self.store.session(key)
        inbound_id = await self.store.record_inbound(msg, key)
        assert inbound_id is not None
        result = await self.agent(tools).complete(RunRequest(f"run{self.runs}", session, Conversation.of_key(key), (msg,), (inbound_id,)))
        history = await self.store.history(session)
        ids = {c.id for c in calls}
        results = [r for m in history for r in m.tool_results if r.tool_call_id in ids]
        return result, results


@pytest.fixture
async def loop(llm: FakeLLM, tmp_path: Path) -> AsyncIterator[Loop]:
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        provider = make_provider("openai", api_key="sk-test", base_url=llm.openai_base_url, timeout=10, max_retries=0)
        try:
            yield Loop(llm, store, tmp_path / "ws", provider)
        finally:
            await provider.aclose()
        llm.assert_tool_pairing()


def system_prompt(llm: FakeLLM, index: int = -1) -> str:
    messages = llm.requests[index].body["messages"]
    assert messages[0]["role"] == "system"
    return messages[0]["content"]


def offered(llm: FakeLLM, index: int = -1) -> list[str]:
    return [t["function"]["name"] for t in llm.requests[index].body.get("tools", [])]


async def test_every_builtin_tool_is_offered(loop: Loop) -> None:
    await loop.run()
    assert offered(loop.llm) == ["read_file", "write_file", "edit_file", "list_files", "search_files",
                                 "memory_search", "memory_get"]


async def test_read_range_and_edit_ambiguity_through_the_loop(loop: Loop) -> None:
    lines = "".join(f"item {i}\n" for i in range(1, 31))
    result, results = await loop.run(
        Call("write_file", {"path": "list.md", "content": lines + "item 3 again\n"}, id="w"),
        Call("read_file", {"path": "list.md", "offset": 4, "limit": 2}, id="r"),
        Call("edit_file", {"path": "list.md", "old_text": "item 3", "new_text": "ITEM 3"}, id="e1"),
        Call("edit_file", {"path": "list.md", "old_text": "item 3\n", "new_text": "ITEM 3\n"}, id="e2"),
        Call("edit_file", {"path": "list.md", "old_text": "item 2", "new_text": "ITEM 2", "replace_all": True},
             id="e3"),
    )
    assert result.text == "done"
    read, ambiguous, unique, everywhere = results[1:]
    assert read.content == "     5\titem 5\n     6\titem 6\n[list.md: lines 5-6 of 31; continue with offset=6]"
    assert ambiguous.is_error and ambiguous.content.startswith("old_text matches 3 places in list.md (lines 3, 30, 31)")
    assert unique.content == "edited list.md: replaced 1 occurrence at line 3"
    assert everywhere.content.startswith("edited list.md: replaced 11 occurrences (lines 2, 20, 21,")
    text = (loop.root / "test-u1" / "list.md").read_text()
    assert text.startswith("item 1\nITEM 2\nITEM 3\n") and text.endswith("ITEM 29\nitem 30\nitem 3 again\n")
    # the model read each result: the request after each call carries it
    assert "ITEM 3" not in str(loop.llm.requests[2].body) and "replaced 1 occurrence" in str(loop.llm.requests[4].body)


async def test_search_and_list_caps_through_the_loop(loop: Loop, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(find, "MAX_LIST_ENTRIES", 2)
    content = "".join(f"TODO task {i}\n" for i in range(120))
    _, results = await loop.run(
        Call("write_file", {"path": "a/tasks.md", "content": content}, id="w"),
        Call("search_files", {"pattern": "TODO task 1\\d\\b", "max_results": 3}, id="s"),
        Call("list_files", {"pattern": "*.md"}, id="l"),
        Call("search_files", {"pattern": "[unclosed"}, id="bad"),
    )
    search, listing, bad = results[1:]
    assert search.content.splitlines() == [
        "a/tasks.md:11: TODO task 10", "a/tasks.md:12: TODO task 11", "a/tasks.md:13: TODO task 12",
        "[10 matching lines in 1 files; showing the first 3 (max_results=3); narrow it with path, include or the "
        "pattern]"]
    assert listing.content.splitlines() == [
        "a/tasks.md  1.5 KB", "AGENTS.md  1.7 KB", "[listing stopped at 2 entries; narrow it with path or pattern]"]
    assert bad.is_error and "not a valid regular expression" in bad.content


async def test_memory_tools_through_the_loop(loop: Loop) -> None:
    memory = {"MEMORY.md": "# People\nAlice: sister, birthday May 4.\n",
              "memory/2026-11-20.md": "Lunch with Alice at noon.\n\nThe car needs new tyres.\n"}
    _, results = await loop.run(
        *[Call("write_file", {"path": p, "content": c}, id=f"w{i}") for i, (p, c) in enumerate(memory.items())],
        Call("memory_search", {"query": "tyres for the car"}, id="s"),
        Call("memory_get", {"path": "memory/2026-11-20.md", "offset": 2}, id="g"),
        Call("memory_get", {"path": "AGENTS.md"}, id="x"),
    )
    search, get, refused = results[2:]
    assert search.content.startswith("memory/2026-11-20.md:3-3 (score ")
    assert search.content.endswith("     3\tThe car needs new tyres.") and "Alice" not in search.content
    assert get.content == "     3\tThe car needs new tyres.\n[memory/2026-11-20.md: lines 3-3 of 3]"
    assert refused.is_error and "AGENTS.md is not memory" in refused.content


async def test_group_workspace_is_not_a_members_dm_workspace(loop: Loop) -> None:
    await loop.run(Call("write_file", {"path": "MEMORY.md", "content": "PRIVATE-DM-FACT\n"}, id="w1"))
    _, group = await loop.run(
        Call("read_file", {"path": "MEMORY.md"}, id="r1"),
        Call("memory_search", {"query": "PRIVATE-DM-FACT"}, id="s1"),
        Call("read_file", {"path": "../test-u1/MEMORY.md"}, id="r2"),
        Call("write_file", {"path": "MEMORY.md", "content": "GROUP-FACT\n"}, id="w2"),
        chat_type=ChatType.GROUP,
    )
    read, search, escape, _ = group
    assert read.is_error and "no such file: MEMORY.md" in read.content
    assert "PRIVATE-DM-FACT" not in search.content and "PRIVATE" not in escape.content and escape.is_error
    assert (loop.root / "test-u1" / "MEMORY.md").read_text() == "PRIVATE-DM-FACT\n"
    assert (loop.root / "test-group-g1" / "MEMORY.md").read_text() == "GROUP-FACT\n"
    # another member of the same group shares the group's workspace, not u1's DM one
    _, other = await loop.run(Call("read_file", {"path": "MEMORY.md"}, id="r3"), chat_type=ChatType.GROUP, user="u2")
    assert "GROUP-FACT" in other[0].content


async def test_memory_md_stays_out_of_group_prompts(loop: Loop) -> None:
    for name in ("test-u1", "test-group-g1"):
        (loop.root / name).mkdir(parents=True)
        (loop.root / name / "MEMORY.md").write_text(f"MEMORY OF {name}\n")
    await loop.run(text="hello")
    assert "MEMORY OF test-u1" in system_prompt(loop.llm)
    await loop.run(text="hello", chat_type=ChatType.GROUP)
    prompt = system_prompt(loop.llm)
    assert "MEMORY OF" not in prompt and "AGENTS.md" in prompt
