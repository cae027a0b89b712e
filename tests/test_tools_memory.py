"""Memory: the pure ranking half with tables, the tools on a real workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.conversation import Conversation
from bot.llm import ToolCall, ToolResult
from bot.tools import ToolContext, ToolRegistry, builtin_registry, memory
from bot.tools.memory import Passage, passages_of, rank, stem, tokenize


@pytest.mark.parametrize(("word", "expected"), [
    ("meetings", "meet"), ("meeting", "meet"), ("called", "call"), ("notes", "note"), ("boss", "boss"),
    ("parties", "party"), ("bus", "bus"), ("analysis", "analysis"), ("red", "red"), ("sing", "sing"),
])
def test_stem(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_tokenize_drops_stop_words_and_keeps_digits() -> None:
    assert tokenize("The Meetings with Alice on 2026-11-23, at 9!") == ["meet", "alice", "2026", "11", "23", "9"]


def test_passages_are_paragraphs_with_their_heading_and_capped_windows() -> None:
    lines = ["# Family", "Alice likes tea.", "", "## Work", "Deadline Friday", "", *[f"l{i}" for i in range(14)]]
    passages = passages_of("MEMORY.md", lines)
    assert [(c.start, c.end) for c in passages] == [(1, 2), (4, 5), (7, 18), (19, 20)]
    assert passages[0].text == "# Family\nAlice likes tea."


def test_rank_prefers_rare_terms_and_dense_passages() -> None:
    passages = [
        Passage("MEMORY.md", 1, 1, "project notes project notes project notes"),
        Passage("MEMORY.md", 3, 3, "Alice birthday is on May 4"),
        Passage("MEMORY.md", 5, 5, "project alice"),
        Passage("MEMORY.md", 7, 9, "a long paragraph about many other things, the weather, the garden, and alice once"),
    ]
    found = rank(passages, "Alice's birthday", 3)
    assert [c.start for _, c in found] == [3, 5, 7]
    assert found[0][0] > found[1][0] > found[2][0] > 0
    assert rank(passages, "the and of", 3) == [] and rank(passages, "zebra", 3) == []


def test_rank_ties_go_to_newer_notes() -> None:
    passages = [Passage("memory/2026-01-02.md", 1, 1, "dentist"), Passage("MEMORY.md", 1, 1, "dentist"),
              Passage("memory/2026-03-01.md", 1, 1, "dentist"), Passage("memory/misc.md", 1, 1, "dentist")]
    assert [c.path for _, c in rank(passages, "dentist", 4)] == [
        "memory/2026-03-01.md", "memory/2026-01-02.md", "MEMORY.md", "memory/misc.md"]


# -- the tools on a workspace -------------------------------------------------------------

@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory" / "old").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# People\nAlice: sister, birthday May 4.\n\n# Work\nBob is my manager.\n")
    (root / "memory" / "2026-11-20.md").write_text("Lunch with Alice.\n\nDentist on Monday at 9.\n")
    (root / "memory" / "old" / "2025-01-01.md").write_text("Alice moved to Lyon.\n")
    (root / "memory" / "notes.txt").write_text("Alice is not in a .md file\n")
    (root / "notes.md").write_text("Alice outside memory\n")
    outside = tmp_path / "outside.md"
    outside.write_text("Alice secret\n")
    (root / "memory" / "leak.md").symlink_to(outside)
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(ws, Conversation.of_key("agent:main:telegram:dm:42"), "run-1", "main", "42")


@pytest.fixture
def registry() -> ToolRegistry:
    return builtin_registry()


async def run(registry: ToolRegistry, ctx: ToolContext, name: str, **arguments: Any) -> ToolResult:
    [result] = await registry.execute([ToolCall("c1", name, json.dumps(arguments))], ctx)
    return result


async def test_search_ranks_memory_files_only_with_line_numbers(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "memory_search", query="alice birthday")
    blocks = result.content.split("\n\n")
    assert blocks[0].startswith("MEMORY.md:1-2 (score ")
    assert blocks[0].endswith("     1\t# People\n     2\tAlice: sister, birthday May 4.")
    heads = [b.splitlines()[0].split(" (")[0] for b in blocks]
    assert heads == ["MEMORY.md:1-2", "memory/2026-11-20.md:1-1", "memory/old/2025-01-01.md:1-1"]
    assert "secret" not in result.content and "outside memory" not in result.content and ".txt" not in result.content


async def test_search_caps_results_and_says_when_nothing_matches(registry: ToolRegistry, ctx: ToolContext,
                                                                 ws: Path) -> None:
    one = await run(registry, ctx, "memory_search", query="alice", max_results=1)
    assert one.content.count("(score ") == 1
    nothing = await run(registry, ctx, "memory_search", query="zebra")
    assert nothing.content == "Nothing in memory matches 'zebra' (3 files searched)."
    bad = await run(registry, ctx, "memory_search", query="the of", max_results=3)
    assert bad.is_error and "no words to search for" in bad.content
    empty_ws = ws.parent / "empty"
    empty_ws.mkdir()
    empty = await run(registry, ToolContext(empty_ws, Conversation.of_key("agent:main:telegram:dm:1"), "r", "main", "1"), "memory_search",
                      query="alice")
    assert empty.content == "Memory is empty: there is no MEMORY.md and no memory/*.md yet."


async def test_search_cuts_long_passages(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "SNIPPET_CHARS", 30)
    (ws / "MEMORY.md").write_text("Alice " + "x" * 100 + "\n")
    result = await run(registry, ctx, "memory_search", query="alice")
    assert "MEMORY.md:1-1 (score" in result.content
    assert "     1\tAlice " + "x" * 24 + "… [cut; memory_get shows the rest]\n" in result.content


@pytest.mark.parametrize(("arguments", "error", "expected"), [
    ({}, False, "     1\t# People"),
    ({"path": "memory/2026-11-20.md", "offset": 2, "limit": 1}, False,
     "     3\tDentist on Monday at 9.\n[memory/2026-11-20.md: lines 3-3 of 3]"),
    ({"path": "notes.md"}, True, "notes.md is not memory"),
    ({"path": "memory/../notes.md"}, True, "is not memory"),
    ({"path": "memory/leak.md"}, True, "outside the workspace"),
    ({"path": "../outside.md"}, True, "outside the workspace"),
    ({"path": "memory/none.md"}, True, "no such file: memory/none.md"),
])
async def test_memory_get_reads_memory_and_nothing_else(registry: ToolRegistry, ctx: ToolContext,
                                                        arguments: dict[str, Any], error: bool, expected: str) -> None:
    result = await run(registry, ctx, "memory_get", **arguments)
    assert result.is_error is error and expected in result.content, result.content


async def test_search_reads_a_bounded_amount(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "MAX_MEMORY_BYTES", 80)  # MEMORY.md (62 B) fits, the notes do not
    result = await run(registry, ctx, "memory_search", query="alice")
    assert result.content.startswith("MEMORY.md:1-2 (score")
    assert result.content.endswith("[not searched (over 2.0 MB each or 80 B in all): memory/2026-11-20.md, "
                                   "memory/old/2025-01-01.md]")
