"""Workspaces: directory names, seeding from templates, context files."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

import bot.workspace as workspace
import bot.workspace.context as context_files
import bot.workspace.seeding as seeding
from bot.conversation import Conversation, conversation_for
from bot.messages import ChatType, InboundMessage, Sender
from bot.workspace import (
    CONTEXT_FILES,
    MAX_NAME_LEN,
    SEEDED_MARKER,
    ContextFile,
    Workspaces,
    load_context_files,
    safe_name,
    truncation_marker,
)

REPO_TEMPLATES = Path(__file__).resolve().parent.parent / "workspaces" / "templates"
SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


def msg(
    platform: str = "telegram", chat_type: ChatType = ChatType.DM, chat_id: str = "42", user: str = "42"
) -> InboundMessage:
    return InboundMessage(platform, "bot", chat_id, chat_type, Sender(user, "Ann"), "hi", "1")


def conv(m: InboundMessage, scope: str = "per-group", person: str | None = None) -> Conversation:
    """``m``'s conversation; ``person`` links its sender (``dm_scope: linked``)."""
    links = {person: [f"{m.platform}:{m.sender.id}"]} if person else None
    return conversation_for(m, "main", dm_scope="linked" if person else "per-user", identity_links=links,
                            group_scope=scope)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- naming


@pytest.mark.parametrize(
    ("kwargs", "scope", "person", "expected"),
    [
        ({}, "per-group", None, "telegram-42"),
        ({"platform": "discord", "user": "123456789012345678"}, "per-group", None, "discord-123456789012345678"),
        ({}, "per-group", "alice", "alice"),
        ({"chat_type": ChatType.GROUP, "chat_id": "-100123"}, "per-group", None, "telegram-group--100123"),
        ({"chat_type": ChatType.GROUP, "chat_id": "-100123"}, "per-group", "alice", "telegram-group--100123"),
        (
            {"chat_type": ChatType.GROUP, "chat_id": "-100123", "user": "7"},
            "per-user", None, "telegram-group--100123-user-7",
        ),
        (
            {"platform": "slack", "chat_type": ChatType.GROUP, "chat_id": "C0123ABC"},
            "per-group", None, "slack-group-C0123ABC",
        ),
        ({}, "per-user", None, "telegram-42"),  # group_scope does not touch DMs
    ],
)
def test_dir_for_table(tmp_path: Path, kwargs: dict, scope: str, person: str | None, expected: str) -> None:
    ws = Workspaces(tmp_path, REPO_TEMPLATES)
    assert ws.dir_for(conv(msg(**kwargs), scope, person)) == tmp_path / expected


HOSTILE = ["../../etc", "..", ".", "", "a/b", "a_b", "a\\b", ".hidden", "-rf", "x" * 500,
           "ユーザー", "naïve", "a\x00b", "a b", "a-b", "group-5", "5-user-7", "abc-0123456789ab"]


@pytest.mark.parametrize("raw", HOSTILE)
def test_safe_name_is_always_a_plain_safe_name(raw: str) -> None:
    for name in (safe_name(raw), safe_name("telegram", raw), safe_name("telegram", "group", raw, "user", raw)):
        assert SAFE.match(name), name
        assert name not in (".", "..")
        assert not name.startswith((".", "-"))
        assert len(name) <= MAX_NAME_LEN
        assert "/" not in name and "\\" not in name


def test_hostile_ids_stay_under_the_root(tmp_path: Path) -> None:
    ws = Workspaces(tmp_path, REPO_TEMPLATES)
    for raw in HOSTILE:
        for m in (msg(user=raw), msg(chat_type=ChatType.GROUP, chat_id=raw)):
            path = ws.dir_for(conv(m))
            assert path.parent == tmp_path
            assert Path(os.path.realpath(path)).parent == Path(os.path.realpath(tmp_path))
        assert ws.dir_for(conv(msg(), person=raw)).parent == tmp_path


def test_readable_ids_are_kept_and_changed_ones_get_a_hash() -> None:
    assert safe_name("a_b") == "a_b"
    assert safe_name("a/b").startswith("a_b-")
    assert safe_name("a/b") != safe_name("a_b") != safe_name("a\\b") != safe_name("a/b")
    assert safe_name("../../etc").startswith("_._.._etc-")
    assert safe_name("ユーザー") != safe_name("ユーザ")  # both all-underscore, told apart by hash
    long = safe_name("x" * 500)
    assert len(long) == MAX_NAME_LEN and long != safe_name("x" * 501)
    assert safe_name("a/b") == safe_name("a/b")  # deterministic


def test_names_never_collide_across_shapes() -> None:
    """DM, group and per-user-group names come from part tuples of different shapes;
    hyphens inside a part and hash-like endings force a hash, so the shapes stay apart."""
    tuples = [
        ("telegram", "group-5"), ("telegram", "group", "5"),  # DM of user "group-5" vs group 5
        ("telegram", "group", "5-user-7"), ("telegram", "group", "5", "user", "7"),
        ("telegram-group", "5"), ("telegram",), ("telegram", "abc"),
        ("telegram", "0123456789ab"), ("telegram_",),  # a plain id shaped like a hash suffix
        ("a/b",), ("a_b",), ("a\\b",), ("a_b-" + "0" * 12,), ("",), ("_",),
        ("telegram", "-100"), ("telegram", "", "100"), ("telegram-", "100"),
    ]
    names = [safe_name(*t) for t in tuples]
    assert len(set(names)) == len(names), dict(zip(tuples, names, strict=True))


# --------------------------------------------------------------------------- seeding


@pytest.fixture
def templates(tmp_path: Path) -> Path:
    t = tmp_path / "templates"
    (t / "memory").mkdir(parents=True)
    (t / "AGENTS.md").write_text("agents\n")
    (t / "SOUL.md").write_text("soul\n")
    (t / "memory" / "README.md").write_text("daily notes\n")
    (t / ".gitkeep").write_text("")
    return t


async def test_ensure_seeds_templates(tmp_path: Path, templates: Path) -> None:
    ws = Workspaces(tmp_path / "ws", templates)
    path = await ws.prepare(conv(msg()))
    assert path == tmp_path / "ws" / "telegram-42"
    assert (path / "AGENTS.md").read_text() == "agents\n"
    assert (path / "memory" / "README.md").read_text() == "daily notes\n"
    assert not (path / ".gitkeep").exists()
    assert (path / SEEDED_MARKER).exists()
    assert path.stat().st_mode & 0o777 == 0o700
    assert (path / "SOUL.md").stat().st_mode & 0o777 == 0o600


async def test_repo_templates_seed_the_documented_files(tmp_path: Path) -> None:
    path = await Workspaces(tmp_path, REPO_TEMPLATES).prepare(conv(msg()))
    seeded = {p.name for p in path.iterdir()}
    assert {"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md"} <= seeded
    for name in seeded - {SEEDED_MARKER}:
        assert 0 < len((path / name).read_text()) < 2000, name
    assert "chatgate" in (path / "IDENTITY.md").read_text()
    assert "NO_REPLY" in (path / "AGENTS.md").read_text()


async def test_ensure_is_idempotent_and_never_overwrites(tmp_path: Path, templates: Path) -> None:
    ws = Workspaces(tmp_path / "ws", templates)
    path = await ws.prepare(conv(msg()))
    (path / "SOUL.md").write_text("mine")
    await ws.ensure(path)
    assert (path / "SOUL.md").read_text() == "mine"
    # a new process (new Workspaces) does not overwrite either
    await Workspaces(tmp_path / "ws", templates).ensure(path)
    assert (path / "SOUL.md").read_text() == "mine"


async def test_existing_file_is_kept_on_first_seed(tmp_path: Path, templates: Path) -> None:
    ws = Workspaces(tmp_path / "ws", templates)
    path = ws.dir_for(conv(msg()))
    path.mkdir(parents=True)
    (path / "AGENTS.md").write_text("already here")
    await ws.ensure(path)
    assert (path / "AGENTS.md").read_text() == "already here"
    assert (path / "SOUL.md").read_text() == "soul\n"


async def test_deleted_file_is_not_reseeded_after_restart(tmp_path: Path, templates: Path) -> None:
    path = await Workspaces(tmp_path / "ws", templates).prepare(conv(msg()))
    (path / "SOUL.md").unlink()
    await Workspaces(tmp_path / "ws", templates).ensure(path)  # "restart"
    assert not (path / "SOUL.md").exists()
    assert (path / "AGENTS.md").exists()


async def test_template_added_later_reaches_old_workspaces(tmp_path: Path, templates: Path) -> None:
    path = await Workspaces(tmp_path / "ws", templates).prepare(conv(msg()))
    (path / "SOUL.md").unlink()
    (templates / "TOOLS.md").write_text("tools\n")
    await Workspaces(tmp_path / "ws", templates).ensure(path)
    assert (path / "TOOLS.md").read_text() == "tools\n"
    assert not (path / "SOUL.md").exists()


async def test_concurrent_ensure_seeds_once(tmp_path: Path, templates: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    real = workspace.seed_workspace

    def counting(path: Path, tmpl: Path, skip: frozenset[str] = frozenset()) -> list[str]:
        calls.append(path)
        return real(path, tmpl, skip)

    monkeypatch.setattr(seeding, "seed_workspace", counting)  # where Workspaces looks it up
    ws = Workspaces(tmp_path / "ws", templates)
    a, b = ws.dir_for(conv(msg(user="1"))), ws.dir_for(conv(msg(user="2")))
    results = await asyncio.gather(*(ws.ensure(a if i % 2 else b) for i in range(50)))
    assert set(results) == {a, b}
    assert sorted(calls) == sorted([a, b])
    assert (a / "AGENTS.md").exists() and (b / "AGENTS.md").exists()
    assert not ws._locks  # locks are dropped once a workspace is seeded


def test_seeding_races_across_processes_do_not_clobber(tmp_path: Path, templates: Path) -> None:
    """Two processes seeding the same workspace: O_EXCL means the first file wins."""
    path = tmp_path / "ws" / "x"
    path.mkdir(parents=True)
    (path / "AGENTS.md").write_text("written by the other process")
    assert workspace.seed_workspace(path, templates) == ["SOUL.md", "memory/README.md"]
    assert (path / "AGENTS.md").read_text() == "written by the other process"


def test_failed_copy_is_offered_again(tmp_path: Path, templates: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ws" / "x"
    real = Path.read_bytes

    def flaky(self: Path) -> bytes:
        if self.name == "SOUL.md":
            raise PermissionError("unreadable")
        return real(self)

    with monkeypatch.context() as m:
        m.setattr(Path, "read_bytes", flaky)
        assert workspace.seed_workspace(path, templates) == ["AGENTS.md", "memory/README.md"]
    assert not (path / "SOUL.md").exists()  # no empty leftover
    assert workspace.seed_workspace(path, templates) == ["SOUL.md"]
    assert (path / SEEDED_MARKER).read_text().splitlines()[1:] == ["AGENTS.md", "SOUL.md", "memory/README.md"]


def test_symlinked_subfolder_cannot_take_the_copy_outside(tmp_path: Path, templates: Path) -> None:
    path = tmp_path / "ws" / "x"
    path.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (path / "memory").symlink_to(outside)
    assert workspace.seed_workspace(path, templates) == ["AGENTS.md", "SOUL.md"]
    assert list(outside.iterdir()) == []


async def test_ensure_refuses_paths_outside_the_root(tmp_path: Path, templates: Path) -> None:
    ws = Workspaces(tmp_path / "ws", templates)
    with pytest.raises(ValueError):
        await ws.ensure(tmp_path / "elsewhere")
    with pytest.raises(ValueError):
        await ws.ensure(tmp_path / "ws" / "a" / "b")


async def test_missing_templates_give_an_empty_workspace(tmp_path: Path) -> None:
    path = await Workspaces(tmp_path / "ws", tmp_path / "nope").prepare(conv(msg()))
    assert path.is_dir() and list(path.iterdir()) == []


# --------------------------------------------------------------------------- context files


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    context_files._cache.clear()


def test_context_files_in_fixed_order(tmp_path: Path) -> None:
    for name in reversed(CONTEXT_FILES):
        (tmp_path / name).write_text(f"{name} body")
    (tmp_path / "OTHER.md").write_text("not loaded")
    files = load_context_files(tmp_path)
    assert [f.name for f in files] == list(CONTEXT_FILES)
    assert files[0] == ContextFile("AGENTS.md", "AGENTS.md body", False)


def test_missing_and_blank_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a")
    (tmp_path / "BOOTSTRAP.md").write_text("  \n")  # emptied = done with the first run
    (tmp_path / "USER.md").mkdir()  # not a regular file
    assert [f.name for f in load_context_files(tmp_path)] == ["AGENTS.md"]


def test_per_file_cap_with_marker(tmp_path: Path) -> None:
    (tmp_path / "USER.md").write_text("u" * 32_345)
    (user,) = load_context_files(tmp_path)
    assert user.truncated
    assert user.content == "u" * 20_000 + "\n\n" + "[… truncated: 12,345 more characters in USER.md]"


def test_total_cap_with_markers(tmp_path: Path) -> None:
    for name in ("AGENTS.md", "SOUL.md", "USER.md", "MEMORY.md"):
        (tmp_path / name).write_text("x" * 25_000)
    files = load_context_files(tmp_path)
    kept = [f.content.count("x") for f in files]
    assert kept == [20_000, 20_000, 20_000, 0]
    assert sum(kept) == 60_000
    assert files[3].content == truncation_marker("MEMORY.md", 25_000)
    assert all(f.truncated for f in files)


def test_total_cap_cuts_inside_a_file(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * 7)
    (tmp_path / "SOUL.md").write_text("s" * 10)
    agents, soul = load_context_files(tmp_path, total_cap=12)
    assert agents == ContextFile("AGENTS.md", "a" * 7)
    assert soul == ContextFile("SOUL.md", "sssss\n\n[… truncated: 5 more characters in SOUL.md]", True)


def test_unchanged_file_is_read_once_and_a_changed_one_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = context_files._read

    def counting(fd: int, name: str, *args: object) -> object:
        reads.append(name)
        return real(fd, name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(context_files, "_read", counting)
    f = tmp_path / "USER.md"
    f.write_text("first")
    assert load_context_files(tmp_path)[0].content == "first"
    first = load_context_files(tmp_path)[0]
    assert reads == ["USER.md"]
    f.write_text("second, longer")
    assert load_context_files(tmp_path)[0].content == "second, longer"
    assert reads == ["USER.md", "USER.md"]
    # same size, mtime forced back to the old value: inode/ctime still give it away
    st = f.stat()
    tmp = tmp_path / "new"
    tmp.write_text("SECOND, LONGER")
    os.replace(tmp, f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert load_context_files(tmp_path)[0].content == "SECOND, LONGER"
    assert load_context_files(tmp_path)[0] is load_context_files(tmp_path)[0]  # cached object
    assert first.content == "first"


def test_symlink_leaving_the_workspace_is_skipped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "secret.txt").write_text("TOKEN=abc")
    (ws / "USER.md").symlink_to(tmp_path / "secret.txt")
    (ws / "notes.md").write_text("inside")
    (ws / "TOOLS.md").symlink_to(ws / "notes.md")
    assert [(f.name, f.content) for f in load_context_files(ws)] == [("TOOLS.md", "inside")]


def test_fifo_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "MEMORY.md")
    assert load_context_files(tmp_path) == []


@pytest.mark.parametrize("bad", ["../USER.md", "a/b.md", "", "..", "."])
def test_context_names_must_be_plain(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        load_context_files(tmp_path, [bad])


def test_huge_file_reads_only_its_head(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(b"m" * (3 * 1024 * 1024))
    (memory,) = load_context_files(tmp_path)
    assert memory.content.startswith("m" * 20_000 + "\n\n[… truncated: ")
    assert memory.content.endswith("more bytes in MEMORY.md]")
