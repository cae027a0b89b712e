"""SQLite-only behaviour: the file, its migrations, its errors, its pragmas."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import threading
from pathlib import Path

import aiosqlite
import pytest

from bot.errors import SchemaTooNewError, StoreCorruptError, StoreError
from bot.llm import Message, parts_to_json
from bot.messages import Answer, ChatType, Chunk, InboundMessage, Sender, Target
from bot.store import migrations
from bot.store.base import Session, Turn
from bot.store.history import HISTORY_LAST
from bot.store.migrations import MIGRATIONS, SCHEMA_VERSION, Migration, split_statements
from bot.store.sqlite import SQLiteStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "chatgate.db"


def raw(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def message(message_id: str) -> InboundMessage:
    return InboundMessage("telegram", "bot1", "c1", ChatType.DM, Sender("u1"), "hi", message_id)


# -- migrations -------------------------------------------------------------------------


async def test_migrations_are_recorded(db_path: Path) -> None:
    async with SQLiteStore(db_path):
        pass
    assert raw(db_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert raw(db_path, "SELECT id, name FROM migrations ORDER BY id") == [
        (i, m.name) for i, m in enumerate(MIGRATIONS, start=1)
    ]
    tables = {name for (name,) in raw(db_path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"sessions", "messages", "inbound", "usage", "migrations"} <= tables


async def test_reopening_keeps_data_and_does_not_rerun_migrations(db_path: Path) -> None:
    async with SQLiteStore(db_path) as store:
        session = await store.session("k")
        await store.append_turn(Turn(session, "r1", (Message.user("remember me"),)))
        inbound_id = await store.record_inbound(message("m1"), "k")
    applied = raw(db_path, "SELECT id, name, applied_at FROM migrations")

    store = await SQLiteStore(db_path).open()
    try:
        assert await store.session("k") == session
        assert [m.text for m in await store.history(session)] == ["remember me"]
        assert [r.id for r in await store.unanswered()] == [inbound_id]
        assert await store.record_inbound(message("m1"), "k") is None  # dedupe survives a restart
    finally:
        await store.close()
    assert raw(db_path, "SELECT id, name, applied_at FROM migrations") == applied


async def test_a_new_migration_applies_only_itself(db_path: Path) -> None:
    async with SQLiteStore(db_path):
        pass
    later = MIGRATIONS + (
        Migration("0099_test", "CREATE TABLE extra (x TEXT DEFAULT 'a;b'); -- a comment; with a semicolon\n"
                               "CREATE INDEX extra_x ON extra (x);"),
    )  # fmt: skip
    async with aiosqlite.connect(db_path, isolation_level=None) as db:
        assert await migrations.apply(db, str(db_path), later) == 1
        assert await migrations.apply(db, str(db_path), later) == 0
    assert raw(db_path, "PRAGMA user_version") == [(len(later),)]
    assert [name for (name,) in raw(db_path, "SELECT name FROM migrations ORDER BY id")][-1] == "0099_test"
    assert raw(db_path, "SELECT dflt_value FROM pragma_table_info('extra')") == [("'a;b'",)]


async def test_a_failing_migration_changes_nothing(db_path: Path) -> None:
    async with SQLiteStore(db_path):
        pass
    broken = MIGRATIONS + (Migration("0099_broken", "CREATE TABLE half (x); INSERT INTO nowhere VALUES (1);"),)
    async with aiosqlite.connect(db_path, isolation_level=None) as db:
        with pytest.raises(sqlite3.OperationalError, match="nowhere"):
            await migrations.apply(db, str(db_path), broken)
        assert not db.in_transaction
    assert raw(db_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert raw(db_path, "SELECT name FROM sqlite_master WHERE name = 'half'") == []


@pytest.mark.parametrize(
    ("script", "statements"),
    [
        ("", []),
        ("-- only a comment\n", []),
        ("CREATE TABLE a (x);", ["CREATE TABLE a (x);"]),
        ("CREATE TABLE a (x)", ["CREATE TABLE a (x);"]),
        ("CREATE TABLE a (x); CREATE TABLE b (y);", ["CREATE TABLE a (x);", "CREATE TABLE b (y);"]),
        ("INSERT INTO a VALUES ('x;y');", ["INSERT INTO a VALUES ('x;y');"]),
        (
            "CREATE TRIGGER t AFTER INSERT ON a BEGIN DELETE FROM b; DELETE FROM c; END;",
            ["CREATE TRIGGER t AFTER INSERT ON a BEGIN DELETE FROM b; DELETE FROM c; END;"],
        ),
    ],
)
def test_split_statements(script: str, statements: list[str]) -> None:
    assert split_statements(script) == statements


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("content", [os.urandom(4096), b"storage:\n  path: oops, this is YAML\n" * 20])
async def test_a_file_that_is_not_sqlite_is_named_in_the_error(db_path: Path, content: bytes) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(content)
    threads = threading.active_count()

    with pytest.raises(StoreCorruptError) as caught:
        async with SQLiteStore(db_path):
            pass

    assert str(caught.value) == f"not a chatgate database or corrupt: {db_path}; move it away or set storage.path"
    assert db_path.read_bytes() == content  # never overwritten
    async with asyncio.timeout(5):  # the connection's thread was stopped (it exits just after saying so)
        while threading.active_count() != threads:
            await asyncio.sleep(0.01)


async def test_another_programs_sqlite_database_is_refused(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    raw(db_path, "CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreCorruptError, match=str(db_path)):
        await SQLiteStore(db_path).open()
    assert raw(db_path, "SELECT name FROM sqlite_master WHERE name = 'migrations'") == []


async def test_a_newer_schema_is_refused_with_both_versions(db_path: Path) -> None:
    async with SQLiteStore(db_path):
        pass
    raw(db_path, f"PRAGMA user_version = {SCHEMA_VERSION + 3}")

    with pytest.raises(SchemaTooNewError) as caught:
        await SQLiteStore(db_path).open()

    text = str(caught.value)
    assert str(db_path) in text and "written by a newer chatgate" in text
    assert f"version {SCHEMA_VERSION + 3}" in text and f"version {SCHEMA_VERSION}" in text


async def test_an_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StoreError, match="a-file"):
        await SQLiteStore(tmp_path / "a-file" / "chatgate.db").open()


async def test_a_closed_store_refuses_work(db_path: Path) -> None:
    store = await SQLiteStore(db_path).open()
    await store.close()
    with pytest.raises(StoreError, match="not open"):
        await store.session("k")


# -- the file and its pragmas ---------------------------------------------------------------


async def test_wal_mode_private_file_in_a_created_directory(db_path: Path) -> None:
    async with SQLiteStore(db_path):
        assert raw(db_path, "PRAGMA journal_mode") == [("wal",)]
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600


async def test_foreign_keys_are_enforced_and_a_failed_turn_leaves_nothing(db_path: Path) -> None:
    async with SQLiteStore(db_path) as store:
        real = await store.session("k")
        inbound_id = await store.record_inbound(message("m1"), "k")
        ghost = Session(id=999, key="ghost", created_at=0.0)
        assert inbound_id is not None
        with pytest.raises(sqlite3.IntegrityError):
            await store.append_turn(Turn(ghost, "r1", (Message.user("x"),), inbound_ids=(inbound_id,)))
        assert [r.id for r in await store.unanswered()] == [inbound_id]  # rolled back as a whole
        await store.append_turn(Turn(real, "r2", (Message.user("still works"),)))
        assert [m.text for m in await store.history(real)] == ["still works"]
    assert raw(db_path, "SELECT COUNT(*) FROM usage") == [(1,)]


async def test_concurrent_turns_get_consecutive_ids(db_path: Path) -> None:
    async with SQLiteStore(db_path) as store:
        sessions = await asyncio.gather(*(store.session(f"k{s}") for s in range(50)))

        async def writer(session: Session) -> None:
            for t in range(4):
                msgs = tuple(Message.user(f"{session.key}:{t}:{i}") for i in range(t + 2))
                await store.append_turn(Turn(session, f"{session.key}-{t}", msgs))

        await asyncio.gather(*(writer(s) for s in sessions))

    rows = raw(db_path, "SELECT run_id, id, seq FROM messages ORDER BY id")
    by_run: dict[str, list[tuple[int, int]]] = {}
    for run_id, id_, seq in rows:
        by_run.setdefault(str(run_id), []).append((int(id_), int(seq)))  # type: ignore[call-overload]
    assert len(by_run) == 200
    for run_id, ids in by_run.items():
        first = ids[0][0]
        assert ids == [(first + i, i) for i in range(len(ids))], run_id


async def test_last_n_messages_use_the_index(db_path: Path) -> None:
    async with SQLiteStore(db_path) as store:
        big, small = await store.session("big"), await store.session("small")
        await store.append_turn(Turn(big, "r1", tuple(Message.user(str(i)) for i in range(10_000))))
        await store.append_turn(Turn(small, "r2", tuple(Message.user(str(i)) for i in range(10))))
        assert [m.text for m in (await store.recent(big, 3)).messages] == ["9997", "9998", "9999"]
        assert [m.text for m in (await store.recent(small, 3)).messages] == ["7", "8", "9"]

    plan = " ".join(str(row[-1]) for row in raw(db_path, f"EXPLAIN QUERY PLAN {HISTORY_LAST.replace('?', '1')}"))
    assert "USING INDEX messages_live" in plan  # the partial index of messages not compacted
    assert "TEMP B-TREE" not in plan


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The operations queued to aiosqlite's thread (its ``_execute``), one per trip."""
    queued: list[object] = []
    real = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: object, *args: object, **kwargs: object) -> object:
        queued.append(fn)
        return await real(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return queued


async def test_a_turn_is_one_trip_to_the_connections_thread(db_path: Path, trips: list[object]) -> None:
    """The store queues each operation to aiosqlite's thread as one function (its
    ``_execute``): a turn's many statements cost the event loop one wait, not one each."""
    async with SQLiteStore(db_path) as store:
        session = await store.session("agent:main:test:dm:u1")
        trips.clear()  # opening and the session's row were trips of their own
        answer = Answer("run-1", "telegram", Target("c1", ChatType.DM), (Chunk("one"), Chunk("two")), (1,))
        await store.append_turn(Turn(session, "run-1", (Message.user("hi"), Message.assistant("hello")),
                                     answer=answer))
        assert len(trips) == 1
        recent = await store.recent(session, 10)
        assert len(trips) == 2 and [m.text for m in recent.messages] == ["hi", "hello"] and recent.live == 2
        await store.chunk_sent(answer, 1, "m2")
        assert len(trips) == 3


async def test_a_burst_of_inbound_events_is_one_transaction(db_path: Path, trips: list[object]) -> None:
    async with SQLiteStore(db_path) as store:
        trips.clear()  # opening's own trips
        ids = await asyncio.gather(*(store.record_inbound(message(str(i % 50)), "k") for i in range(60)))
        assert len(trips) == 1  # one group commit for the whole burst
        assert len(set(ids[:50])) == 50 and None not in ids[:50] and ids[50:] == [None] * 10  # the repeats
        assert raw(db_path, "SELECT COUNT(*) FROM inbound") == [(50,)]
        assert await store.record_inbound(message("new"), "k") is not None  # alone: a burst of one
    with pytest.raises(StoreError):  # closed: every caller hears it, nothing is confirmed
        await asyncio.gather(*(store.record_inbound(message(f"late{i}"), "k") for i in range(3)))


async def test_a_cancelled_writer_still_completes_its_turn(db_path: Path) -> None:
    async with SQLiteStore(db_path) as store:
        session = await store.session("k")
        turn = Turn(session, "r1", tuple(Message.user(str(i)) for i in range(5)))
        task = asyncio.create_task(store.append_turn(turn))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async with asyncio.timeout(5):
            while not await store.history(session):
                await asyncio.sleep(0.01)
        assert len(await store.history(session)) == 5
        await store.append_turn(Turn(session, "r2", (Message.user("next"),)))  # no transaction left open


async def test_closing_right_after_a_writer_is_cancelled_still_keeps_its_turn(db_path: Path) -> None:
    store = await SQLiteStore(db_path).open()
    session = await store.session("k")
    task = asyncio.create_task(store.append_turn(Turn(session, "r1", (Message.user("kept"),))))
    await asyncio.sleep(0)  # the write is handed over to its own task, which has not run yet
    task.cancel()
    await store.close()  # a shutdown right then: the write still lands
    with pytest.raises(asyncio.CancelledError):
        await task
    assert raw(db_path, "SELECT COUNT(*) FROM messages") == [(1,)]


async def test_a_schema_2_database_upgrades_to_3_and_keeps_its_data(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    async with aiosqlite.connect(db_path, isolation_level=None) as db:
        assert await migrations.apply(db, str(db_path), MIGRATIONS[:2]) == 2
    with sqlite3.connect(db_path) as conn:  # rows as a schema-2 chatgate wrote them
        conn.execute("INSERT INTO sessions (id, key, created_at) VALUES (1, 'k', 1.0)")
        conn.execute("INSERT INTO messages (session_id, run_id, seq, role, parts, created_at)"
                     " VALUES (1, 'r1', 0, 'user', ?, 1.0)", (parts_to_json(Message.user("kept").parts),))  # fmt: skip
    assert raw(db_path, "PRAGMA user_version") == [(2,)]

    async with SQLiteStore(db_path) as store:
        session = await store.session("k")
        assert session == Session(1, "k", 1.0)
        assert [m.text for m in await store.history(session)] == ["kept"]
        code = await store.pairing_request("telegram", "42", "Ada", now=10.0)
        assert code is not None and await store.approve_pairing(code.code, 11.0) is not None
        answer = Answer("r1", "telegram", Target("c1"), (Chunk("hi"),))
        await store.store_answer(answer)
        assert await store.undelivered() == [answer]

    assert raw(db_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert raw(db_path, "SELECT id, name FROM migrations WHERE id >= 3") == [
        (number, m.name) for number, m in enumerate(MIGRATIONS, start=1) if number >= 3]
    assert raw(db_path, "SELECT name FROM migrations WHERE id = 3") == [("0003_pairing_outbound",)]
    assert raw(db_path, "SELECT platform, user_id FROM approved_senders") == [("telegram", "42")]


async def test_codes_pending_before_origins_count_for_their_platform(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    async with aiosqlite.connect(db_path, isolation_level=None) as db:
        assert await migrations.apply(db, str(db_path), MIGRATIONS[:6]) == 6
    with sqlite3.connect(db_path) as conn:  # codes as a schema-6 chatgate wrote them
        conn.executemany("INSERT INTO pairing_codes (code, platform, user_id, user_name, created_at, expires_at)"
                         " VALUES (?, 'telegram', ?, 'x', 10.0, 3610.0)", [("AAAA2222", "a"), ("BBBB2222", "b")])
    async with SQLiteStore(db_path) as store:
        assert await store.pairing_request("telegram", "c", "c", now=20.0) is not None  # the third of telegram's
        assert await store.pairing_request("telegram", "d", "d", now=20.0) is None
        assert await store.approve_pairing("AAAA2222", 21.0) is not None  # an old code is still good
    assert raw(db_path, "SELECT origin FROM pairing_codes ORDER BY code") == [("telegram",)] * 3
