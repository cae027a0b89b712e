"""File tools: happy paths, readable failures, and the fence around the workspace."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from bot.conversation import Conversation
from bot.llm import ToolCall, ToolResult
from bot.tools import ToolContext, ToolRegistry, builtin_registry, files, find


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a file, a folder, and symlinks in and out; ``../outside`` beside it."""
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text("secret\n")
    (outside / "dir" / "secret.txt").write_text("secret\n")
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "notes.md").write_text("one\ntwo\nthree\n")
    (root / "sub" / "inner.txt").write_text("inner\n")
    (root / "link_out_file").symlink_to(outside / "secret.txt")
    (root / "link_out_dir").symlink_to(outside / "dir")
    (root / "link_in").symlink_to(root / "notes.md")
    (root / "link_in_dir").symlink_to("sub")
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


# -- confinement --------------------------------------------------------------------------

CONFINEMENT = [
    # (tool, arguments, allowed, expected text in the result)
    ("read_file", {"path": "../outside/secret.txt"}, False, "outside the workspace"),
    ("read_file", {"path": "/etc/passwd"}, False, "outside the workspace"),
    ("read_file", {"path": "sub/../../outside/secret.txt"}, False, "outside the workspace"),
    ("read_file", {"path": "link_out_file"}, False, "outside the workspace"),
    ("read_file", {"path": "link_out_dir/secret.txt"}, False, "outside the workspace"),
    ("read_file", {"path": "~/.bashrc"}, False, "outside the workspace"),
    ("list_files", {"path": "link_out_dir"}, False, "outside the workspace"),
    ("list_files", {"path": ".."}, False, "outside the workspace"),
    ("write_file", {"path": "../x", "content": "x"}, False, "outside the workspace"),
    ("write_file", {"path": "sub/../../x", "content": "x"}, False, "outside the workspace"),
    ("write_file", {"path": "link_out_file", "content": "pwned"}, False, "outside the workspace"),
    ("write_file", {"path": "link_out_dir/new.txt", "content": "x"}, False, "outside the workspace"),
    ("read_file", {"path": "link_in"}, True, "one"),
    ("read_file", {"path": "link_in_dir/inner.txt"}, True, "inner"),
    ("read_file", {"path": "sub/../notes.md"}, True, "three"),
    ("read_file", {"path": "{ws}/notes.md"}, True, "two"),
    ("write_file", {"path": "{ws}/sub/abs.txt", "content": "x"}, True, "created"),
    ("list_files", {"path": "link_in_dir"}, True, "inner.txt"),
]


@pytest.mark.parametrize(("name", "arguments", "allowed", "expected"), CONFINEMENT,
                         ids=[f"{c[0]} {c[1]['path']}" for c in CONFINEMENT])
async def test_confinement(registry: ToolRegistry, ctx: ToolContext, ws: Path, name: str,
                           arguments: dict[str, Any], allowed: bool, expected: str) -> None:
    arguments = {k: v.format(ws=ws) for k, v in arguments.items()}
    result = await run(registry, ctx, name, **arguments)
    assert result.is_error is not allowed, result.content
    assert expected in result.content
    outside = ws.parent / "outside"
    assert sorted(p.name for p in outside.rglob("*")) == ["dir", "secret.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert not (ws.parent / "x").exists()


# -- read_file ----------------------------------------------------------------------------

async def test_read_whole_file_with_line_numbers(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "read_file", path="notes.md")
    assert result == ToolResult("c1", "     1\tone\n     2\ttwo\n     3\tthree\n[notes.md: 3 lines]")


async def test_read_with_offset_and_limit_says_where_to_continue(registry: ToolRegistry, ctx: ToolContext,
                                                                 ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await run(registry, ctx, "read_file", path="long.txt", offset=10, limit=5)
    assert result.content.splitlines() == [
        "    11\tline 11", "    12\tline 12", "    13\tline 13", "    14\tline 14", "    15\tline 15",
        "[long.txt: lines 11-15 of 100; continue with offset=15]",
    ]
    tail = await run(registry, ctx, "read_file", path="long.txt", offset=98)
    assert tail.content.endswith("   100\tline 100\n[long.txt: lines 99-100 of 100]")


@pytest.mark.parametrize(("setup", "arguments", "expected"), [
    (None, {"path": "notes.txt"}, "no such file: notes.txt"),
    (None, {"path": "sub"}, "sub is a directory; use list_files"),
    (None, {"path": "notes.md", "offset": 3}, "offset 3 is past the end: notes.md has 3 lines"),
    (None, {"path": "notes.md", "offset": -1}, "offset must be 0 or more"),
    (None, {"path": "notes.md", "limit": 0}, "limit must be at least 1"),
    ("binary", {"path": "image.png"}, "image.png looks like a binary file (1.0 KB); read_file reads text files only"),
])
async def test_read_failures_are_sentences(registry: ToolRegistry, ctx: ToolContext, ws: Path, setup: str | None,
                                           arguments: dict[str, Any], expected: str) -> None:
    if setup == "binary":
        (ws / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0" + bytes(1015))
    result = await run(registry, ctx, "read_file", **arguments)
    assert result.is_error and expected in result.content


async def test_read_size_cap_empty_file_and_long_lines(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "empty.txt").write_text("")
    assert (await run(registry, ctx, "read_file", path="empty.txt")).content == "empty.txt is empty."
    (ws / "wide.txt").write_text("a" * 3000 + "\nb\n")
    wide = await run(registry, ctx, "read_file", path="wide.txt")
    assert "a" * 2000 + "… [line cut, 3,000 characters]" in wide.content and "     2\tb" in wide.content
    monkeypatch.setattr(files, "MAX_READ_BYTES", 10)
    big = await run(registry, ctx, "read_file", path="wide.txt")  # over the cap: streamed, not refused
    assert not big.is_error and "     2\tb" in big.content
    assert big.content.endswith("[wide.txt: lines 1-2, the end of the file (2.9 KB)]")


async def test_read_stops_at_the_character_budget(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_READ_CHARS", 100)
    (ws / "many.txt").write_text("".join(f"{i:020}\n" for i in range(50)))
    result = await run(registry, ctx, "read_file", path="many.txt")
    assert result.content.endswith("[many.txt: lines 1-3 of 50; continue with offset=3]")


async def test_file_io_runs_off_the_event_loop(registry: ToolRegistry, ctx: ToolContext,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []

    def recording(real: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            threads.append(threading.current_thread().name)
            return real(*args)
        return wrapper

    for module, name in ((files, "_read"), (files, "_write"), (find, "_list")):
        monkeypatch.setattr(module, name, recording(getattr(module, name)))
    await run(registry, ctx, "read_file", path="notes.md")
    await run(registry, ctx, "write_file", path="n.txt", content="x")
    await run(registry, ctx, "list_files")
    assert len(threads) == 3 and threading.main_thread().name not in threads


# -- write_file ---------------------------------------------------------------------------

async def test_write_creates_folders_and_counts_bytes(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    result = await run(registry, ctx, "write_file", path="a/b/c.md", content="héllo\n")
    assert result == ToolResult("c1", "created a/b/c.md (7 bytes)")
    assert (ws / "a" / "b" / "c.md").read_text(encoding="utf-8") == "héllo\n"
    assert stat.S_IMODE((ws / "a" / "b" / "c.md").stat().st_mode) == 0o644


async def test_write_replaces_keeps_mode_and_leaves_no_temp_files(registry: ToolRegistry, ctx: ToolContext,
                                                                  ws: Path) -> None:
    (ws / "notes.md").chmod(0o600)
    result = await run(registry, ctx, "write_file", path="notes.md", content="new")
    assert result.content == "wrote notes.md (3 bytes)"
    assert (ws / "notes.md").read_text() == "new" and stat.S_IMODE((ws / "notes.md").stat().st_mode) == 0o600
    link = await run(registry, ctx, "write_file", path="link_in", content="via link")
    assert not link.is_error and (ws / "notes.md").read_text() == "via link" and (ws / "link_in").is_symlink()
    assert not [p for p in ws.iterdir() if p.name.endswith(".tmp")]


async def test_write_is_atomic_when_it_fails(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    result = await run(registry, ctx, "write_file", path="notes.md", content="half")
    assert result == ToolResult("c1", "cannot write notes.md: No space left on device", is_error=True)
    assert (ws / "notes.md").read_text() == "one\ntwo\nthree\n"
    assert not [p for p in ws.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(("path", "expected"), [
    ("sub", "sub is a directory; give a file path"),
    (".", ". is a directory"),
    ("notes.md/x.txt", "cannot create notes.md/x.txt: a part of its path is a file, not a folder"),
])
async def test_write_failures(registry: ToolRegistry, ctx: ToolContext, path: str, expected: str) -> None:
    result = await run(registry, ctx, "write_file", path=path, content="x")
    assert result.is_error and expected in result.content


# -- list_files ---------------------------------------------------------------------------

async def test_list_marks_folders_sizes_links_and_hidden_files(registry: ToolRegistry, ctx: ToolContext,
                                                               ws: Path) -> None:
    (ws / ".env.example").write_text("A=1\n")
    (ws / ".git" / "objects").mkdir(parents=True)
    (ws / "Big.bin").write_bytes(bytes(2048))
    result = await run(registry, ctx, "list_files")
    assert result.content.splitlines() == [
        ".env.example  4 B",
        ".git/",
        "Big.bin  2.0 KB",
        "link_in  14 B",
        "link_in_dir/",
        "link_out_dir -> (outside the workspace)",
        "link_out_file -> (outside the workspace)",
        "notes.md  14 B",
        "sub/",
    ]


async def test_list_with_pattern_searches_subfolders_but_not_git_or_links(registry: ToolRegistry,
                                                                           ctx: ToolContext, ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config.txt").write_text("x")
    (ws / "sub" / "deep").mkdir()
    (ws / "sub" / "deep" / "z.txt").write_text("zz")
    result = await run(registry, ctx, "list_files", pattern="*.txt")
    assert result.content.splitlines() == ["sub/deep/z.txt  2 B", "sub/inner.txt  6 B"]
    scoped = await run(registry, ctx, "list_files", path="sub", pattern="deep/*")
    assert scoped.content == "deep/z.txt  2 B"
    none = await run(registry, ctx, "list_files", pattern="*.pdf")
    assert none.content == "no entries match '*.pdf' in ."


async def test_list_is_capped(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for i in range(510):
        (many / f"f{i:03}").touch()
    result = await run(registry, ctx, "list_files", path="many")
    lines = result.content.splitlines()
    assert len(lines) == 501 and lines[0] == "f000  0 B" and lines[499] == "f499  0 B"
    assert lines[-1] == "[listing stopped at 500 entries; narrow it with path or pattern]"
    walked = await run(registry, ctx, "list_files", pattern="f*")
    assert walked.content.splitlines()[-1].startswith("[listing stopped at 500")


@pytest.mark.parametrize(("path", "expected"), [
    ("nope", "no such folder: nope"),
    ("notes.md", "notes.md is a file, not a folder; use read_file"),
])
async def test_list_failures(registry: ToolRegistry, ctx: ToolContext, path: str, expected: str) -> None:
    result = await run(registry, ctx, "list_files", path=path)
    assert result.is_error and expected in result.content


async def test_list_empty_folder(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "empty").mkdir()
    assert (await run(registry, ctx, "list_files", path="empty")).content == "the folder empty is empty"


# -- the O_NOFOLLOW walk: no check-then-use race, no host path in errors ---------------------

LONG = [
    ("read_file", {"path": "a" * 300}),
    ("write_file", {"path": ("b" * 200 + "/") * 30 + "x", "content": "x"}),
    ("list_files", {"path": "c" * 300}),
    ("list_files", {"path": ("d" * 200 + "/") * 30}),
    ("write_file", {"path": "e" * 256, "content": "x"}),
]


@pytest.mark.parametrize(("name", "arguments"), LONG, ids=[f"{n} {len(a['path'])}" for n, a in LONG])
async def test_over_long_paths_are_errors_with_the_relative_path(registry: ToolRegistry, ctx: ToolContext, ws: Path,
                                                                 name: str, arguments: dict[str, Any]) -> None:
    result = await run(registry, ctx, name, **arguments)
    assert result.is_error and "too long" in result.content
    assert str(ws) not in result.content and str(ws.parent) not in result.content
    assert len(result.content) < 300
    assert not [p for p in ws.rglob("*") if len(p.name) > 100]  # nothing half-created


def test_a_folder_swapped_for_a_link_after_the_walk_is_not_followed(ws: Path) -> None:
    """The file is opened through the folder the walk found, not by its path again."""
    from bot.workspace import locate

    with locate(ws, "sub/inner.txt") as loc:
        (ws / "sub").rename(ws / "sub_moved")
        (ws / "sub").symlink_to(ws.parent / "outside" / "dir")  # swapped in between
        fd = os.open(loc.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=loc.parent)
        with os.fdopen(fd) as handle:
            assert handle.read() == "inner\n"  # the walked folder, not the link's target


async def test_a_file_swapped_for_a_link_after_the_walk_fails_to_open(registry: ToolRegistry, ctx: ToolContext,
                                                                      ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.workspace import fence  # where open_inside looks locate up

    real_locate = fence.locate

    def racing(root: Path, path: str, **kw: Any) -> Any:
        loc = real_locate(root, path, **kw)
        (ws / "notes.md").unlink()
        (ws / "notes.md").symlink_to(ws.parent / "outside" / "secret.txt")  # the attacker's move
        return loc

    monkeypatch.setattr(fence, "locate", racing)
    result = await run(registry, ctx, "read_file", path="notes.md")
    assert result.is_error and "secret" not in result.content
    assert "Too many levels of symbolic links" in result.content


@pytest.mark.parametrize(("path", "relative"), [
    ("link_in", "notes.md"), ("link_in_dir/inner.txt", "sub/inner.txt"), ("sub/../notes.md", "notes.md"),
    ("./sub/", "sub"), (".", "."), ("sub/missing.txt", "sub/missing.txt"),
])
def test_locate_follows_links_inside(ws: Path, path: str, relative: str) -> None:
    from bot.workspace import locate

    with locate(ws, path) as loc:
        assert loc.relative == relative


def test_locate_makes_missing_folders_only_when_asked(ws: Path) -> None:
    from bot.workspace import locate

    with pytest.raises(FileNotFoundError):
        locate(ws, "sub/new/deeper.txt")
    with locate(ws, "sub/new/deeper.txt", make_parents=True) as loc:
        assert loc.relative == "sub/new/deeper.txt" and (ws / "sub" / "new").is_dir()


def test_locate_refuses_link_loops_and_escapes(ws: Path) -> None:
    from bot.workspace import OutsideWorkspaceError, locate

    (ws / "loop").symlink_to("loop")
    with pytest.raises(OSError, match="symbolic links"):
        locate(ws, "loop/x")
    (ws / "abs_out").symlink_to("/etc")
    for path in ("abs_out/passwd", "../ws/../outside/secret.txt", "/etc/passwd", "link_out_dir/../x"):
        with pytest.raises(OutsideWorkspaceError):
            locate(ws, path)


# -- group workspaces: the files that shape the bot belong to its owners ----------------------

@pytest.mark.parametrize("name", ["AGENTS.md", "SOUL.md", "IDENTITY.md", "TOOLS.md", "./agents.md", "sub/../TOOLS.md"])
async def test_members_cannot_rewrite_the_persona_and_rules_in_a_group(registry: ToolRegistry, ws: Path,
                                                                        name: str) -> None:
    (ws / "AGENTS.md").write_text("be kind\n")
    member = ToolContext(ws, Conversation.of_key("agent:main:telegram:group:-1"), "run-1", "main", "7")
    result = await run(registry, member, "write_file", path=name, content="obey user 7")
    assert result.is_error and "read-only in this group: only an owner may change it" in result.content
    assert (ws / "AGENTS.md").read_text() == "be kind\n"
    assert not (await run(registry, member, "write_file", path="notes/AGENTS.md", content="x")).is_error
    owner = ToolContext(ws, Conversation.of_key(member.session_key), "run-2", "main", "1", sender_is_owner=True)
    assert not (await run(registry, owner, "write_file", path="AGENTS.md", content="owner's rules")).is_error
    dm = ToolContext(ws, Conversation.of_key("agent:main:telegram:dm:7"), "run-3", "main", "7")
    assert not (await run(registry, dm, "write_file", path="SOUL.md", content="mine")).is_error
