"""Safe upgrades (issue 34 item 6): a copy kept before SQLite migrations run, a database of a
newer chatgate refused in one line, ``chatgate migrate --check`` changing nothing, and two
processes migrating one PostgreSQL database at once."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import aiosqlite
import asyncpg
import pytest

from bot.capabilities import registry
from bot.errors import SchemaTooNewError
from bot.store import migrations
from bot.store.migrations import MIGRATIONS, SCHEMA_VERSION
from bot.store.pg import PostgresStore
from bot.store.pg.schema import DIALECT
from bot.store.schema_steps import Migration
from bot.store.sqlite import SQLiteStore
from bot.store.upgrade import backup, backups, pending_sqlite
from tests.pg import fresh_database
from tests.test_cli import ROOT, base_env, run_cli
from tests.test_store_postgres import DATA_RIGHTS, runtime_role

OLD = 10  # an old chatgate's schema: the first ten migrations


async def old_database(path: Path, version: int = OLD) -> None:
    """A database as an older chatgate left it: its first ``version`` migrations, WAL, one session."""
    db = await aiosqlite.connect(path, isolation_level=None)
    try:
        await db.execute("PRAGMA journal_mode = WAL")
        await migrations.apply(db, str(path), MIGRATIONS[:version])
        await db.execute("INSERT INTO sessions (key, created_at) VALUES ('agent:main:telegram:dm:42', 1)")
    finally:
        await db.close()


def version_of(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


def config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"storage: {{path: {tmp_path / 'chatgate.db'}{extra}}}\n"
                    "channels: {telegram: {enabled: true, token: '1:x', base_url: 'http://127.0.0.1:9'}}\n"
                    "providers: {openai: {api_key: k}}\n")
    return path


async def test_an_old_database_is_copied_before_it_is_migrated_and_check_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "chatgate.db"
    await old_database(db)
    checked = await asyncio.to_thread(run_cli, "migrate", "--check", "-c", str(config(tmp_path)), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    names = [m.name for m in MIGRATIONS[OLD:]] + [m.name for spec in registry.specs() for m in spec.migrations]
    assert checked.stdout.splitlines() == [f"{db}: schema version {OLD}; {len(names)} migrations would be applied:",
                                           *(f"  {n}" for n in names)]
    assert version_of(db) == OLD and backups(db) == []  # nothing changed, nothing copied

    async with SQLiteStore(db, backups=2) as store:  # what `chatgate run` opens (storage.backups)
        for spec in registry.specs():
            await store.apply_steps(spec.name, spec.migrations)
    [kept] = backups(db)
    assert kept.name.startswith(f"chatgate.db.v{OLD}-") and kept.stat().st_mode & 0o777 == 0o600
    assert version_of(kept) == OLD and version_of(db) == SCHEMA_VERSION
    with sqlite3.connect(kept) as copy:  # the copy is whole: what the WAL held is in it
        assert copy.execute("SELECT key FROM sessions").fetchall() == [("agent:main:telegram:dm:42",)]
    async with SQLiteStore(db, backups=2):  # up to date: no second copy
        pass
    assert backups(db) == [kept]
    done = await asyncio.to_thread(run_cli, "migrate", "--check", "-c", str(config(tmp_path)), cwd=tmp_path)
    assert done.stdout.strip() == f"{db}: up to date (schema version {SCHEMA_VERSION}), nothing to apply"


async def test_only_the_newest_copies_are_kept_and_none_with_zero(tmp_path: Path) -> None:
    db = tmp_path / "chatgate.db"
    await old_database(db)
    for day in range(4):
        backup(db, OLD, 3, now=1_700_000_000 + day * 86400)
    assert [p.name.split("-", 1)[1] for p in backups(db)] == ["20231115T221320Z.bak", "20231116T221320Z.bak",
                                                             "20231117T221320Z.bak"]
    fresh = tmp_path / "other.db"
    await old_database(fresh, 5)
    async with SQLiteStore(fresh, backups=0):
        pass
    assert backups(fresh) == [] and version_of(fresh) == SCHEMA_VERSION


async def test_a_capabilitys_new_tables_on_an_old_database_are_preceded_by_a_copy(tmp_path: Path) -> None:
    db = tmp_path / "chatgate.db"
    await old_database(db, SCHEMA_VERSION)
    step = (Migration("demo/0001_x", "CREATE TABLE demo_x (id {id});"),)
    async with SQLiteStore(db, backups=3) as store:
        assert backups(db) == []
        assert await store.apply_steps("demo", step) == 1
    [kept] = backups(db)
    with sqlite3.connect(kept) as copy:
        assert copy.execute("SELECT count(*) FROM sqlite_master WHERE name = 'demo_x'").fetchone() == (0,)
    assert (await pending_sqlite(db, [("demo", step)])).names == ()


async def test_a_database_of_a_newer_chatgate_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "chatgate.db"
    await old_database(db, SCHEMA_VERSION)
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    cfg = config(tmp_path)
    for args in (("run", "-c", str(cfg)), ("migrate", "--check", "-c", str(cfg)), ("traces", "-c", str(cfg))):
        done = await asyncio.to_thread(run_cli, *args, cwd=tmp_path)
        assert done.returncode == 1, (args, done.stderr)
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("chatgate: ") and "written by a newer chatgate" in last, done.stderr
        assert "Traceback" not in done.stderr
    assert version_of(db) == SCHEMA_VERSION + 1 and backups(db) == []


async def test_a_capability_migration_of_a_newer_chatgate_refuses_too(tmp_path: Path) -> None:
    db = tmp_path / "chatgate.db"
    await old_database(db, SCHEMA_VERSION)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO capability_migrations VALUES ('demo/0002_later', 0)")
    step = (Migration("demo/0001_x", "CREATE TABLE demo_x (id {id});"),)
    async with SQLiteStore(db, backups=3) as store:
        with pytest.raises(SchemaTooNewError, match="demo's migration demo/0002_later, written by a newer chatgate"):
            await store.apply_steps("demo", step)
    with pytest.raises(SchemaTooNewError):
        await pending_sqlite(db, [("demo", step)])
    assert backups(db) == []


async def test_two_processes_migrate_one_postgresql_database_at_once() -> None:
    """Two `chatgate migrate` processes started together on a bare database: both succeed,
    each migration is recorded once (the advisory lock), and a role with data rights only then
    opens the store and every capability's steps without a statement of DDL."""
    async with fresh_database(migrated=False) as url, runtime_role(url) as (runtime, owner):
        procs = [await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "migrate", "--to", url, cwd=ROOT, env=base_env(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            for _ in range(2)]
        outs = [await asyncio.wait_for(p.communicate(), 60) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1].decode() for o in outs]
        assert sorted(o[0].decode().strip().endswith(("applied", "nothing to apply")) for o in outs) == [True, True]
        rows = [r["name"] for r in await owner.fetch("SELECT name FROM migrations ORDER BY id")]
        assert rows == list(DIALECT)
        steps = [m.name for spec in registry.specs() for m in spec.migrations]
        assert sorted(r["name"] for r in await owner.fetch("SELECT name FROM capability_migrations")) == sorted(steps)
        checked = await asyncio.to_thread(run_cli, "migrate", "--check", "--to", url, cwd=ROOT)
        assert checked.returncode == 0 and "up to date" in checked.stdout, checked.stderr
        await owner.execute(DATA_RIGHTS.format(role=runtime.split("//")[1].split("@")[0]))
        async with PostgresStore(runtime) as store:
            for spec in registry.specs():
                assert await store.apply_steps(spec.name, spec.migrations) == 0


async def test_migrate_check_on_postgresql_lists_what_is_missing_and_changes_nothing() -> None:
    async with fresh_database() as url:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("DELETE FROM migrations WHERE id = $1", SCHEMA_VERSION)
            done = await asyncio.to_thread(run_cli, "migrate", "--check", "--to", url, cwd=ROOT)
            assert done.returncode == 0, done.stderr
            assert f"  {MIGRATIONS[-1].name}" in done.stdout.splitlines()
            assert await conn.fetchval("SELECT count(*) FROM migrations") == SCHEMA_VERSION - 1
            await conn.execute("INSERT INTO migrations VALUES ($1, $2, 0)", SCHEMA_VERSION, MIGRATIONS[-1].name)
        finally:
            await conn.close()
