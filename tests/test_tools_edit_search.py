"""edit_file, search_files and big-file reads: exact edits, capped searches, streamed ranges."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from bot.conversation import Conversation
from bot.llm import ToolCall, ToolResult
from bot.tools import ToolContext, ToolRegistry, builtin_registry, files, find


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("password = hunter2\n")
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "notes.md").write_text("# Notes\n\nbuy milk\nbuy bread\ncall mum\n")
    (root / "src" / "app.py").write_text("def main():\n    print('hello')\n\n\ndef test_main():\n    main()\n")
    (root / "link_out").symlink_to(outside / "secret.txt")
    (root / "link_out_dir").symlink_to(outside)
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


# -- edit_file ----------------------------------------------------------------------------

async def test_edit_replaces_one_exact_match_and_names_the_line(registry: ToolRegistry, ctx: ToolContext,
                                                               ws: Path) -> None:
    result = await run(registry, ctx, "edit_file", path="notes.md", old_text="buy bread", new_text="buy rye bread")
    assert result == ToolResult("c1", "edited notes.md: replaced 1 occurrence at line 4")
    assert (ws / "notes.md").read_text() == "# Notes\n\nbuy milk\nbuy rye bread\ncall mum\n"


async def test_edit_refuses_ambiguous_matches_and_says_how_many(registry: ToolRegistry, ctx: ToolContext,
                                                                ws: Path) -> None:
    result = await run(registry, ctx, "edit_file", path="notes.md", old_text="buy ", new_text="get ")
    assert result.is_error
    assert result.content == ("old_text matches 2 places in notes.md (lines 3, 4); include more surrounding text "
                              "so it matches exactly one, or set replace_all=true")
    assert (ws / "notes.md").read_text().count("buy ") == 2  # untouched
    everywhere = await run(registry, ctx, "edit_file", path="notes.md", old_text="buy ", new_text="get ",
                           replace_all=True)
    assert everywhere.content == "edited notes.md: replaced 2 occurrences (lines 3, 4)"
    assert (ws / "notes.md").read_text() == "# Notes\n\nget milk\nget bread\ncall mum\n"


@pytest.mark.parametrize(("old", "expected"), [
    ("buy cheese", "old_text was not found in notes.md (0 matches); copy the text exactly"),
    ("     3\tbuy milk", "(0 matches); leave out the line numbers that read_file puts before each line"),
    ("buy   milk", "(0 matches); text like it, with different spaces or indentation, is at line 3"),
    ("milk please", "(0 matches); copy the text exactly"),
    ("milk\n\nbuy bread", "the text is there with different spaces, indentation or line breaks"),
])
async def test_edit_with_no_match_says_so_and_why(registry: ToolRegistry, ctx: ToolContext, ws: Path, old: str,
                                                  expected: str) -> None:
    before = (ws / "notes.md").read_text()
    result = await run(registry, ctx, "edit_file", path="notes.md", old_text=old, new_text="x")
    assert result.is_error and expected in result.content, result.content
    assert (ws / "notes.md").read_text() == before


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"path": "notes.md", "old_text": "", "new_text": "x"}, "old_text is empty"),
    ({"path": "notes.md", "old_text": "a", "new_text": "a"}, "the same; nothing to change"),
    ({"path": "missing.md", "old_text": "a", "new_text": "b"}, "no such file: missing.md"),
    ({"path": "src", "old_text": "a", "new_text": "b"}, "src is a directory"),
    ({"path": "link_out", "old_text": "hunter2", "new_text": "x"}, "outside the workspace"),
    ({"path": "../outside/secret.txt", "old_text": "hunter2", "new_text": "x"}, "outside the workspace"),
])
async def test_edit_failures(registry: ToolRegistry, ctx: ToolContext, ws: Path, arguments: dict[str, Any],
                             expected: str) -> None:
    result = await run(registry, ctx, "edit_file", **arguments)
    assert result.is_error and expected in result.content, result.content
    assert (ws.parent / "outside" / "secret.txt").read_text() == "password = hunter2\n"


async def test_edit_keeps_windows_line_ends_and_bytes_that_are_not_utf8(registry: ToolRegistry, ctx: ToolContext,
                                                                        ws: Path) -> None:
    (ws / "dos.txt").write_bytes(b"one\r\ntwo\r\nlatin1: caf\xe9\r\n")
    result = await run(registry, ctx, "edit_file", path="dos.txt", old_text="one\ntwo", new_text="1\n2")
    assert not result.is_error, result.content
    assert (ws / "dos.txt").read_bytes() == b"1\r\n2\r\nlatin1: caf\xe9\r\n"


async def test_concurrent_edits_of_one_file_both_land(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    calls = [ToolCall("a", "edit_file", json.dumps({"path": "notes.md", "old_text": "milk", "new_text": "oat milk"})),
             ToolCall("b", "edit_file", json.dumps({"path": "notes.md", "old_text": "mum", "new_text": "dad"}))]
    results = await registry.execute(calls, ctx)
    assert not any(r.is_error for r in results)
    assert (ws / "notes.md").read_text() == "# Notes\n\nbuy oat milk\nbuy bread\ncall dad\n"


# -- search_files -------------------------------------------------------------------------

async def test_search_prints_relative_paths_and_line_numbers(registry: ToolRegistry, ctx: ToolContext,
                                                             ws: Path) -> None:
    result = await run(registry, ctx, "search_files", pattern=r"def \w+")
    assert result.content.splitlines() == ["src/app.py:1: def main():", "src/app.py:5: def test_main():"]
    scoped = await run(registry, ctx, "search_files", pattern="MAIN", path="src", ignore_case=True, include="*.py")
    assert scoped.content.splitlines()[0] == "src/app.py:1: def main():" and len(scoped.content.splitlines()) == 3
    one_file = await run(registry, ctx, "search_files", pattern="bu.", path="notes.md")
    assert one_file.content.splitlines() == ["notes.md:3: buy milk", "notes.md:4: buy bread"]
    none = await run(registry, ctx, "search_files", pattern="nothing here")
    assert none == ToolResult("c1", "no lines match 'nothing here' in .")


async def test_search_skips_binaries_git_and_links_out(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"hunter2\0\x01\x02")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("hunter2\n")
    (ws / "mine.txt").write_text("my hunter2 note\n")
    result = await run(registry, ctx, "search_files", pattern="hunter2")
    assert result.content == "mine.txt:1: my hunter2 note"
    outside = await run(registry, ctx, "search_files", pattern="hunter2", path="link_out_dir")
    assert outside.is_error and "outside the workspace" in outside.content


async def test_search_is_capped_in_lines_and_characters(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "many.txt").write_text("".join(f"hit {i}\n" for i in range(300)))
    (ws / "more.txt").write_text("hit again\n")
    result = await run(registry, ctx, "search_files", pattern="hit", max_results=10)
    lines = result.content.splitlines()
    assert lines[:2] == ["many.txt:1: hit 0", "many.txt:2: hit 1"] and len(lines) == 11
    assert lines[-1] == ("[301 matching lines in 2 files; showing the first 10 (max_results=10); "
                         "narrow it with path, include or the pattern]")
    monkeypatch.setattr(find, "MAX_SEARCH_CHARS", 40)
    small = await run(registry, ctx, "search_files", pattern="hit")
    assert len(small.content.splitlines()) == 4 and "the 40-character cap" in small.content
    too_many = await run(registry, ctx, "search_files", pattern="hit", max_results=201)
    assert too_many.is_error and "between 1 and 200" in too_many.content


async def test_search_cuts_long_lines_around_the_match_and_skips_big_files(registry: ToolRegistry, ctx: ToolContext,
                                                                          ws: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "min.js").write_text("x" * 5000 + "NEEDLE" + "y" * 5000)
    result = await run(registry, ctx, "search_files", pattern="NEEDLE")
    text = result.content.removeprefix("min.js:1: ")
    assert "NEEDLE" in text and text.startswith("…") and text.endswith("…") and len(text) == 302
    monkeypatch.setattr(find, "MAX_SEARCH_FILE_BYTES", 1000)
    skipped = await run(registry, ctx, "search_files", pattern="NEEDLE")
    assert skipped.content == "no lines match 'NEEDLE' in .\n[1 files over 1000 B not searched]"


async def test_search_bad_pattern_and_runaway_pattern(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    bad = await run(registry, ctx, "search_files", pattern="(unclosed")
    assert bad.is_error and "'(unclosed' is not a valid regular expression" in bad.content
    monkeypatch.setattr(find, "SEARCH_SECONDS", 0.2)
    (ws / "aaa.txt").write_text("a" * 40 + "b\n")
    started = asyncio.get_running_loop().time()
    slow = await run(registry, ctx, "search_files", pattern="(a|aa)+$")
    assert asyncio.get_running_loop().time() - started < 2
    assert not slow.is_error and "[search stopped early: the pattern took over 0.2 s" in slow.content


async def _largest_gap_while(work: Awaitable[ToolResult]) -> tuple[ToolResult, float]:
    """Run ``work`` beside a ticker; the longest the event loop kept the ticker waiting past 10 ms."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    ticking = asyncio.Event()

    async def tick() -> None:
        last = loop.time()
        ticking.set()
        while True:
            await asyncio.sleep(0.01)
            gaps.append(loop.time() - last)
            last = loop.time()

    ticker = asyncio.create_task(tick())
    try:
        await ticking.wait()  # else work that blocks at once would run before the ticker's first tick
        result = await work
        await asyncio.sleep(0.05)  # a ticker held up by the work wakes here at the latest
    finally:
        ticker.cancel()
    return result, max(gaps)


@pytest.mark.parametrize("pattern", [r"(?:x{5000}){5000}", r"(?:x{65535}){65535}",
                                     "(?x)(?:x{ 65535 }){ 65535 }", r"\p{L}(?:x{5000}){5000}"])
async def test_search_refuses_a_pattern_that_repeats_too_much_and_the_loop_runs_on(registry: ToolRegistry,
                                                                                  ctx: ToolContext,
                                                                                  pattern: str) -> None:
    result, gap = await _largest_gap_while(run(registry, ctx, "search_files", pattern=pattern))
    assert gap < 0.5
    assert result.is_error
    assert result.content == ("the pattern repeats too much to compile (its counted repeats such as {m,n}, "
                              "multiplied out, pass 100,000 steps); simplify it, with smaller counts or fewer "
                              "nested repeats")


async def test_search_refuses_a_long_pattern_and_a_slow_compile(registry: ToolRegistry, ctx: ToolContext,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    long = await run(registry, ctx, "search_files", pattern="a" * 1001)
    assert long.is_error and long.content == "the pattern is 1,001 characters long, over the 1,000 allowed; shorten it"
    assert not (await run(registry, ctx, "search_files", pattern="a" * 1000)).is_error

    def slow_compile(pattern: str, flags: int) -> None:
        time.sleep(0.6)  # in the worker thread: the loop is free meanwhile

    monkeypatch.setattr(find, "_compile", slow_compile)
    monkeypatch.setattr(find, "COMPILE_SECONDS", 0.1)
    slow, gap = await _largest_gap_while(run(registry, ctx, "search_files", pattern="buy"))
    assert gap < 0.5
    assert slow.is_error and slow.content == "the pattern took over 0.1 s to compile; simplify it"


# -- read_file over the size cap ----------------------------------------------------------

async def test_read_streams_a_big_file_by_range(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_READ_BYTES", 100)
    monkeypatch.setattr(files, "_LINE_BYTES", 64)
    (ws / "big.log").write_text("".join(f"entry {i}\n" for i in range(1, 51)) + "z" * 200 + "\nlast\n")
    head = await run(registry, ctx, "read_file", path="big.log", offset=10, limit=3)
    assert head.content.splitlines() == ["    11\tentry 11", "    12\tentry 12", "    13\tentry 13",
                                         "[big.log: lines 11-13 of a 647 B file; continue with offset=13]"]
    tail = await run(registry, ctx, "read_file", path="big.log", offset=49)
    assert tail.content.splitlines() == ["    50\tentry 50", "    51\t" + "z" * 64 + "… [line cut, over 64 B]",
                                         "    52\tlast", "[big.log: lines 50-52, the end of the file (647 B)]"]
    past = await run(registry, ctx, "read_file", path="big.log", offset=60)
    assert past.is_error and "offset 60 is past the end: big.log has 52 lines" in past.content


def test_open_regular_refuses_links_out_and_fifos_without_hanging(tmp_path: Path) -> None:
    from bot.tools.paths import open_regular

    root = tmp_path.resolve() / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("no")
    (root / "real.txt").write_text("ok")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(root / "pipe")
    with open_regular(root / "real.txt", root) as handle:
        assert handle.read() == b"ok"
    with pytest.raises(OSError):
        open_regular(root / "link.txt", root)  # a link swapped in after the check is not followed out
    with pytest.raises(IsADirectoryError):
        open_regular(root / "pipe", root)  # nor does a FIFO block the thread


async def test_search_and_read_skip_fifos(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    result = await run(registry, ctx, "search_files", pattern="buy")
    assert result.content.splitlines() == ["notes.md:3: buy milk", "notes.md:4: buy bread"]
    fifo = await run(registry, ctx, "read_file", path="pipe")
    assert fifo.is_error and "pipe is not a regular file" in fifo.content


async def test_search_follows_links_inside_and_stops_on_huge_trees(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "alias.md").symlink_to(ws / "notes.md")
    result = await run(registry, ctx, "search_files", pattern="call mum")
    assert result.content.splitlines() == ["alias.md:5: call mum", "notes.md:5: call mum"]
    monkeypatch.setattr(find, "MAX_WALK_ENTRIES", 2)
    stopped = await run(registry, ctx, "search_files", pattern="call mum")
    assert stopped.content == ("alias.md:5: call mum\n[search stopped early: over 2 files and folders looked at; "
                               "narrow it with path, include or the pattern]")
    listed = await run(registry, ctx, "list_files", pattern="*")
    assert listed.content.splitlines() == ["alias.md  37 B", "link_out -> (outside the workspace)",
                                           "[listing stopped after looking at 2 files and folders; narrow it with "
                                           "path or pattern]"]
