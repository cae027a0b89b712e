"""SQLiteStore: the SQLite driver of the store (every port's operations are
``bot.store.operations``, written once), on aiosqlite, one file in WAL mode; opened as
``bot.store`` says.

One connection serves everything, on aiosqlite's thread. Each operation (a read, or a
write transaction as a whole) is driven whole on that thread (``drive``), so operations
run one after another, concurrent turns never interleave, a read never sees another
writer's uncommitted rows, and the event loop waits once per operation, not once per
statement. A write transaction, once queued, runs to COMMIT or ROLLBACK even if its
caller is cancelled (the caller still sees the cancellation), so a cancelled writer can
never leave the connection mid-transaction.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Self, TypeVar

import aiosqlite

from bot.errors import StoreCorruptError, StoreError
from bot.store import migrations
from bot.store.engine import SQLITE
from bot.store.op import Count, Fetch, Many, Op
from bot.store.operations import Operations
from bot.store.schema_steps import Migration
from bot.store.steps import _applied, pending
from bot.store.upgrade import backup

log = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY = ":memory:"
BUSY_TIMEOUT_MS = 5000


class SQLiteStore(Operations):
    """Every store port on one SQLite file (or ``":memory:"`` for tests). Before migrations run
    on a database that has a schema already (the core's, or a capability's on opening it), a
    copy is kept beside it (``backups``: the newest so many; 0: none; ``bot.store.upgrade``)."""

    engine = SQLITE

    def __init__(self, path: str | os.PathLike[str], *, backups: int = 0) -> None:
        self.where = str(path) if str(path) == MEMORY else str(Path(path).expanduser())
        self._backups = backups if self.where != MEMORY else 0
        self._found = 0  # the schema version the database had when it opened
        self._backed_up = False
        self._db: aiosqlite.Connection | None = None
        self._writes = set()

    # -- lifecycle -------------------------------------------------------------------

    async def open(self) -> Self:
        """Connect, configure and migrate; closes the connection again if any step fails."""
        if self._db is not None:
            return self
        db: aiosqlite.Connection | None = None
        try:
            if self.where != MEMORY:
                _make_parent(Path(self.where))
            db = await aiosqlite.connect(self.where, isolation_level=None)
            await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
            mode = list(await db.execute_fetchall("PRAGMA journal_mode = WAL"))[0][0]
            if mode != "wal" and self.where != MEMORY:
                log.warning("store %s: journal_mode is %s, not wal (no shared memory on this filesystem?)",
                            self.where, mode)
            await db.execute("PRAGMA synchronous = NORMAL")
            await db.execute("PRAGMA foreign_keys = ON")
            self._found = await migrations.user_version(db)
            if 0 < self._found < migrations.SCHEMA_VERSION:
                await self._backup()
            applied = await migrations.apply(db, self.where)
        except BaseException as exc:
            if db is not None:
                await db.close()
            if isinstance(exc, (sqlite3.Error, OSError)):
                raise _translate(exc, self.where) from exc
            raise
        self._db = db
        log.info("store %s open (schema %d, %d migrations applied now)", self.where, migrations.SCHEMA_VERSION, applied)
        return self

    async def close(self) -> None:
        """Close once the writes already started are done (a cancelled caller's too). Safe to
        call twice."""
        if self._writes:
            await asyncio.wait(set(self._writes))
        db, self._db = self._db, None
        if db is not None:
            await db.close()
            log.info("store %s closed", self.where)

    async def apply_steps(self, owner: str, steps: Sequence[Migration]) -> int:
        """A capability's migrations (``StepOps``), after a copy of a database that had a schema."""
        if steps and self._found and pending(owner, steps, await self._read(_applied(owner)), self.where):
            await self._backup()
        return await super().apply_steps(owner, steps)

    async def _backup(self) -> None:
        """Keep a copy before the first migration this process applies (none when ``backups`` is 0)."""
        if self._backups and not self._backed_up:
            kept = await asyncio.to_thread(backup, self.where, self._found, self._backups)
            self._backed_up = True
            log.info("store %s: a copy of schema version %d kept at %s before migrating", self.where, self._found,
                     kept)

    # -- internals -------------------------------------------------------------------

    async def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """``operation`` on the connection's own thread: a whole read or transaction is one
        hop there and back, not one per statement (the hot path has ~5 per message, not ~18).
        aiosqlite's ``_execute`` is its one entry to that thread, the one its cursors use;
        ``tests/test_store_sqlite.py`` pins that it still behaves so."""
        if self._db is None:
            raise StoreError(f"store is not open: {self.where}")
        return await self._db._execute(operation, self._db._conn)  # noqa: SLF001

    async def _read(self, operation: Op[T], *, snapshot: bool = False) -> T:
        """``operation`` on the connection's thread, in one hop (a snapshot either way: nothing interleaves)."""
        return await self._run(partial(drive, operation=operation))

    async def _write(self, operation: Op[T], *, alone: bool = False) -> T:
        """``operation`` in one IMMEDIATE transaction, in one hop, shielded (``_shielded``); ``alone``
        changes nothing here: the transaction costs no round trip."""
        return await self._shielded(self._run(partial(_transaction, operation, self.where)))


def drive(db: sqlite3.Connection, operation: Op[T]) -> T:
    """Run ``operation`` on ``db`` (on the connection's thread): each request it yields is
    executed there and its result sent back."""
    result: Any = None
    try:
        while True:
            request = operation.send(result)
            if type(request) is Fetch:
                result = db.execute(request.sql, request.args).fetchall()
            elif type(request) is Count:
                result = db.execute(request.sql, request.args).rowcount
            else:
                assert type(request) is Many
                db.executemany(request.sql, request.rows)
                result = None
    except StopIteration as done:
        return done.value


def _transaction(operation: Op[T], path: str, db: sqlite3.Connection) -> T:
    db.execute("BEGIN IMMEDIATE")
    try:
        result = drive(db, operation)
        db.execute("COMMIT")
    except BaseException:
        try:
            db.execute("ROLLBACK")
        except sqlite3.OperationalError:  # no transaction: BEGIN failed or COMMIT went through
            log.debug("store %s: nothing to roll back", path)
        raise
    return result


def _make_parent(path: Path) -> None:
    """Create the parent directory, private to this user when we create it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():  # conversations are private: the file (and its -wal/-shm) is 0600
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def _translate(exc: sqlite3.Error | OSError, path: str) -> StoreError:
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return StoreCorruptError(f"not a chatgate database or corrupt: {path}; move it away or set storage.path")
    return StoreError(f"cannot open database {path}: {exc}")
