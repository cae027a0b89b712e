"""``chatgate migrate``: copy a SQLite database into an empty PostgreSQL one, checked by counts.

Both are opened as stores first, so both stand at the same migration (the SQLite file is
brought up to date if it was older), the capabilities' tables included (``steps``). Every
table of the SQLite file but those a capability's triggers rebuild from the others (``derived``:
a search index, rebuilt on PostgreSQL as the rows arrive) is copied with its ids (``COPY``, in
batches), parents before children, in one PostgreSQL transaction; the identity sequences are
moved past the copied ids; then each table's rows are counted on both sides, and a difference
rolls the whole copy back. A target that already holds rows is refused. The copy is analyzed at
once: until then the planner would guess every table's rows (recall's history search tells a
rare word from a common one by its estimate).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from graphlib import TopologicalSorter

from bot.errors import StoreError
from bot.store.pg import PostgresStore
from bot.store.pg.base import Connection
from bot.store.schema_steps import Migration
from bot.store.sqlite import SQLiteStore

log = logging.getLogger(__name__)

BATCH = 5000
_SKIP = ("migrations", "capability_migrations")  # each database records its own
_PG_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
_PG_COLUMNS = ("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
               " AND table_name = $1")
_FOREIGN_KEYS = ("SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint"
                 " WHERE contype = 'f' AND connamespace = current_schema()::regnamespace")
_IDENTITIES = ("SELECT table_name, column_name FROM information_schema.columns"
               " WHERE table_schema = current_schema() AND is_identity = 'YES'")


@dataclass(frozen=True, slots=True)
class Copied:
    table: str
    rows: int


async def copy_sqlite_to_postgres(source: str | os.PathLike[str], url: str, *,
                                  steps: Sequence[tuple[str, Sequence[Migration]]] = (),
                                  derived: Sequence[str] = ()) -> list[Copied]:
    """Copy every row of the SQLite file ``source`` into the PostgreSQL database at ``url``."""
    if not os.path.isfile(source):
        raise StoreError(f"no SQLite database at {source}")
    async with SQLiteStore(source) as origin, PostgresStore(url) as target:  # both at the same version
        for owner, owned in steps:
            await origin.apply_steps(owner, owned)
            await target.apply_steps(owner, owned)
        with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                               " AND name NOT LIKE 'sqlite_%'")
                      if r[0] not in _SKIP and not any(fnmatchcase(r[0], d) for d in derived)]
            async with target.pool.acquire() as conn, conn.transaction():
                order = await _parents_first(conn, tables)
                for table in order:
                    if await conn.fetchval(f'SELECT EXISTS (SELECT 1 FROM "{table}")'):
                        raise StoreError(f"{target.where} is not empty (table {table} has rows); "
                                         "migrate into a new, empty database")
                copied = [await _copy_table(db, conn, table) for table in order]
                await _move_sequences(conn)
                for c in copied:
                    found = await conn.fetchval(f'SELECT count(*) FROM "{c.table}"')
                    if found != c.rows:
                        raise StoreError(f"table {c.table}: {c.rows} rows in {source}, {found} copied; nothing kept")
            async with target.pool.acquire() as conn:  # statistics now, not at autovacuum's next look
                await conn.execute("ANALYZE")
    return copied


async def _parents_first(conn: Connection, tables: list[str]) -> list[str]:
    """``tables`` ordered so that a table comes after every table its foreign keys name."""
    present = {r[0] for r in await conn.fetch(_PG_TABLES)}
    if missing := [t for t in tables if t not in present]:
        raise StoreError(f"the PostgreSQL database has no table {missing[0]}; is it the same chatgate version?")
    parents: dict[str, set[str]] = {t: set() for t in tables}
    for child, parent in await conn.fetch(_FOREIGN_KEYS):
        if child in parents and parent in parents and child != parent:
            parents[child].add(parent)
    return list(TopologicalSorter(parents).static_order())


async def _copy_table(db: sqlite3.Connection, conn: Connection, table: str) -> Copied:
    columns = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
    target = {r[0] for r in await conn.fetch(_PG_COLUMNS, table)}
    if missing := [c for c in columns if c not in target]:
        raise StoreError(f"the PostgreSQL table {table} has no column {missing[0]}")
    quoted = ", ".join(f'"{c}"' for c in columns)
    rows = 0
    cursor = db.execute(f'SELECT {quoted} FROM "{table}" ORDER BY rowid')
    while batch := cursor.fetchmany(BATCH):
        await conn.copy_records_to_table(table, records=batch, columns=columns)
        rows += len(batch)
    log.info("migrate: %s: %d rows", table, rows)
    return Copied(table, rows)


async def _move_sequences(conn: Connection) -> None:
    """Identity columns go on after the highest copied id."""
    for table, column in await conn.fetch(_IDENTITIES):
        await conn.execute(f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'),"
                           f' coalesce((SELECT max("{column}") FROM "{table}"), 0) + 1, false)')
