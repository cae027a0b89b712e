"""SQLiteStore: the Store and its side ports (pairing, answers, the dashboard's) on aiosqlite, one
file in WAL mode.

    async with SQLiteStore(path) as store:     # opened and migrated on entry
        ...
    store = await open_store(path)              # where the lifetime is not one block
    await store.close()                         # idempotent

One connection serves everything, on aiosqlite's thread. Each operation (a read, or a
write transaction as a whole) is one plain function queued to that thread, so operations
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
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite

from bot.errors import StoreCorruptError, StoreError
from bot.llm import Message, Role, parts_from_json, parts_to_json
from bot.store import answers as sql_answers
from bot.store import browse, migrations
from bot.store import schedules as sql_jobs
from bot.store.answers import AnswerOps
from bot.store.approvals import ApprovalOps
from bot.store.base import (
    AuditEntry,
    Failure,
    Recent,
    Session,
    SessionLog,
    SessionOf,
    SessionSummary,
    StoredMessage,
    Summary,
    Turn,
    UsageReport,
    UsageTotals,
    key_of,
)
from bot.store.dialect import SQLITE
from bot.store.inbound import InboundOps, inbound_from_json, inbound_to_json  # the latter two re-exported
from bot.store.media import MediaOps
from bot.store.models import ModelOps
from bot.store.op import Count, Fetch, Many, Op
from bot.store.pairing import PairingOps
from bot.store.schedules import ScheduleOps
from bot.tracing import Span, SpanKind, TraceRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY = ":memory:"
BUSY_TIMEOUT_MS = 5000

# Constant SQL, so sqlite3's statement cache prepares each one once per connection.
_CURRENT_SESSION = "SELECT id, key, created_at FROM sessions WHERE key = ? AND archived_at IS NULL"
_ARCHIVE_SESSION = "UPDATE sessions SET archived_at = ? WHERE key = ? AND archived_at IS NULL"
_INSERT_SESSION = "INSERT INTO sessions (key, created_at) VALUES (?, ?)"
_HISTORY = "SELECT id, role, parts FROM messages WHERE session_id = ? AND compacted = 0 ORDER BY id"
_HISTORY_LAST = (
    "SELECT id, role, parts FROM messages WHERE session_id = ? AND compacted = 0 ORDER BY id DESC LIMIT ?"
)
_LIVE_COUNT = "SELECT COUNT(*) FROM messages WHERE session_id = ? AND compacted = 0"
_SUMMARY_COLUMNS = "text, through_id, messages, tokens_before, tokens_after, run_id, created_at"
_LAST_SUMMARY = f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE session_id = ? ORDER BY id DESC LIMIT 1"
_SUMMARY_THROUGH = "SELECT MAX(through_id) FROM summaries WHERE session_id = ?"
_INSERT_SUMMARY = (
    "INSERT INTO summaries (session_id, run_id, text, through_id, messages, tokens_before, tokens_after, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_MARK_COMPACTED = "UPDATE messages SET compacted = 1 WHERE session_id = ? AND id <= ? AND compacted = 0"
_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, run_id, seq, role, parts, created_at) VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_USAGE = (
    "INSERT INTO usage (session_id, run_id, model, input_tokens, output_tokens, cache_read_tokens,"
    " cache_write_tokens, cost, created_at, person) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PERSON_USAGE = (
    "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) FROM charges WHERE person = ? AND created_at >= ?"
)
_INSERT_CHARGE = "INSERT INTO charges (person, run_id, tokens, cost, created_at) VALUES (?, ?, ?, ?, ?)"
_USAGE_TOTALS = (
    "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
    " COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),"
    " COALESCE(SUM(cost), 0.0), COALESCE(SUM(run_id NOT LIKE '%-title'), 0) FROM usage WHERE session_id = ?"
)
_INSERT_TRACE = (
    "INSERT OR REPLACE INTO traces (run_id, session_key, agent_id, started_at, ended_at, status, model,"
    " input_tokens, output_tokens, cost, iterations, error, cache_read_tokens, cache_write_tokens, model_why)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_SPAN = (
    "INSERT INTO spans (run_id, kind, name, started_at, duration_ms, input_tokens, output_tokens, cost,"
    " is_error, preview, cache_read_tokens, cache_write_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_TRACE_COLUMNS = (
    "run_id, session_key, agent_id, started_at, ended_at, status, model, input_tokens, output_tokens, cost,"
    " iterations, error, cache_read_tokens, cache_write_tokens, model_why"
)
_LAST_TRACES = f"SELECT {_TRACE_COLUMNS} FROM traces ORDER BY started_at DESC LIMIT ?"
_TRACE = f"SELECT {_TRACE_COLUMNS} FROM traces WHERE run_id = ?"
_LAST_SESSION_TRACES = f"SELECT {_TRACE_COLUMNS} FROM traces WHERE session_key = ? ORDER BY started_at DESC LIMIT ?"
_SPANS = (
    "SELECT kind, name, started_at, duration_ms, input_tokens, output_tokens, cost, is_error, preview,"
    " cache_read_tokens, cache_write_tokens FROM spans WHERE run_id = ? ORDER BY id"
)
_MARK_ANSWERED = "UPDATE inbound SET answered_at = ? WHERE id = ? AND answered_at IS NULL"



class SQLiteStore(InboundOps, AnswerOps, ApprovalOps, MediaOps, ModelOps, PairingOps, ScheduleOps):
    """The Store port on one SQLite file (or ``":memory:"`` for tests)."""

    dialect = SQLITE

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = str(path) if str(path) == MEMORY else str(Path(path).expanduser())
        self._db: aiosqlite.Connection | None = None
        self._writes: set[asyncio.Task[Any]] = set()  # in flight, held so none is orphaned

    @property
    def path(self) -> str:
        return self._path

    # -- lifecycle -------------------------------------------------------------------

    async def open(self) -> SQLiteStore:
        """Connect, configure and migrate; closes the connection again if any step fails."""
        if self._db is not None:
            return self
        db: aiosqlite.Connection | None = None
        try:
            if self._path != MEMORY:
                _make_parent(Path(self._path))
            db = await aiosqlite.connect(self._path, isolation_level=None)
            await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
            mode = list(await db.execute_fetchall("PRAGMA journal_mode = WAL"))[0][0]
            if mode != "wal" and self._path != MEMORY:
                log.warning("store %s: journal_mode is %s, not wal (no shared memory on this filesystem?)",
                            self._path, mode)
            await db.execute("PRAGMA synchronous = NORMAL")
            await db.execute("PRAGMA foreign_keys = ON")
            applied = await migrations.apply(db, self._path)
        except BaseException as exc:
            if db is not None:
                await db.close()
            if isinstance(exc, (sqlite3.Error, OSError)):
                raise _translate(exc, self._path) from exc
            raise
        self._db = db
        log.info("store %s open (schema %d, %d migrations applied now)", self._path, migrations.SCHEMA_VERSION, applied)
        return self

    async def close(self) -> None:
        """Close once the writes already started are done (a cancelled caller's too). Safe to
        call twice."""
        if self._writes:
            await asyncio.wait(set(self._writes))
        db, self._db = self._db, None
        if db is not None:
            await db.close()
            log.info("store %s closed", self._path)

    async def __aenter__(self) -> SQLiteStore:
        return await self.open()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- the Store port --------------------------------------------------------------

    async def session(self, of: SessionOf, *, fresh: bool = False) -> Session:
        key = key_of(of)
        if not fresh:
            rows = await self._run(lambda db: db.execute(_CURRENT_SESSION, (key,)).fetchall())
            if rows:
                return Session(*rows[0])

        def create(db: sqlite3.Connection) -> Session:
            now = time.time()
            if fresh:
                db.execute(_ARCHIVE_SESSION, (now, key))
            else:  # re-check inside the write lock: another process may have made it
                rows = db.execute(_CURRENT_SESSION, (key,)).fetchall()
                if rows:
                    return Session(*rows[0])
            cursor = db.execute(_INSERT_SESSION, (key, now))
            assert cursor.lastrowid is not None
            log.info("session %s: new session %d%s", key, cursor.lastrowid, " (fresh)" if fresh else "")
            return Session(cursor.lastrowid, key, now)

        return await self._transact(create)

    async def history(self, session: Session, limit: int | None = None) -> list[Message]:
        rows = await self._run(lambda db: _live(db, session, limit))
        return [Message(Role(role), parts_from_json(parts)) for _, role, parts in rows]

    async def live_messages(self, session: Session, limit: int | None = None) -> list[StoredMessage]:
        rows = await self._run(lambda db: _live(db, session, limit))
        return [StoredMessage(id_, Message(Role(role), parts_from_json(parts))) for id_, role, parts in rows]

    async def recent(self, session: Session, limit: int) -> Recent:
        def read(db: sqlite3.Connection) -> tuple[list[Any], list[Any], int]:
            summary = db.execute(_LAST_SUMMARY, (session.id,)).fetchall()
            return summary, _live(db, session, limit), db.execute(_LIVE_COUNT, (session.id,)).fetchone()[0]

        summary, rows, live = await self._run(read)
        return Recent(Summary(*summary[0]) if summary else None,
                      [Message(Role(role), parts_from_json(parts)) for _, role, parts in rows], int(live))

    async def live_count(self, session: Session) -> int:
        return int(await self._run(lambda db: db.execute(_LIVE_COUNT, (session.id,)).fetchone()[0]))

    async def summary(self, session: Session) -> Summary | None:
        rows = await self._run(lambda db: db.execute(_LAST_SUMMARY, (session.id,)).fetchall())
        return Summary(*rows[0]) if rows else None

    async def save_summary(self, session: Session, summary: Summary) -> bool:
        s = summary
        row = (session.id, s.run_id, s.text, s.through_id, s.messages, s.tokens_before, s.tokens_after,
               s.created_at or time.time())

        def write(db: sqlite3.Connection) -> bool:
            done = db.execute(_SUMMARY_THROUGH, (session.id,)).fetchone()[0]
            if done is not None and done >= s.through_id:
                return False
            db.execute(_INSERT_SUMMARY, row)
            db.execute(_MARK_COMPACTED, (session.id, s.through_id))
            return True

        saved = await self._transact(write)
        log.info("session %s: summary through message %d %s", session.key, s.through_id,
                 "saved" if saved else "not saved (a later one exists)")
        return saved

    async def append_turn(self, turn: Turn) -> None:
        now = time.time()
        sid, run_id = turn.session.id, turn.run_id
        message_rows = [
            (sid, run_id, seq, str(m.role), parts_to_json(m.parts), now) for seq, m in enumerate(turn.messages)
        ]
        u = turn.usage
        usage_row = (
            sid, run_id, turn.model, u.input_tokens, u.output_tokens,
            u.cache_read_tokens, u.cache_write_tokens, turn.cost, now, None,
        )  # fmt: skip
        charge_rows = [(c.person, run_id, c.tokens, c.cost, now) for c in turn.charges]
        answered_rows = [(now, inbound_id) for inbound_id in turn.inbound_ids] if turn.settle else []
        answer = sql_answers.answer_rows(turn.answer) if turn.answer is not None else None
        t = turn.trace
        closes = turn.closes

        def write(db: sqlite3.Connection) -> None:
            if message_rows:
                db.executemany(_INSERT_MESSAGE, message_rows)
            db.execute(_INSERT_USAGE, usage_row)
            if charge_rows:
                db.executemany(_INSERT_CHARGE, charge_rows)
            if answered_rows:
                db.executemany(_MARK_ANSWERED, answered_rows)
            if answer is not None:
                db.execute(sql_answers.INSERT_ANSWER, answer[0])
                db.executemany(sql_answers.INSERT_CHUNK, answer[1])
            if closes is not None:  # a scheduled task's turn: its occurrence ends with it, never run again
                drive(db, sql_jobs.close(closes, now))
            if t is not None:
                db.execute(_INSERT_TRACE, (
                    t.run_id, t.session_key, t.agent_id, t.started_at, t.ended_at, t.status, t.model,
                    t.input_tokens, t.output_tokens, t.cost, t.iterations, t.error, t.cache_read_tokens,
                    t.cache_write_tokens, t.why,
                ))  # fmt: skip
                db.executemany(_INSERT_SPAN, [
                    (t.run_id, str(s.kind), s.name, s.started_at, s.duration_ms, s.input_tokens, s.output_tokens,
                     s.cost, int(s.is_error), s.preview, s.cache_read_tokens, s.cache_write_tokens) for s in t.spans
                ])  # fmt: skip

        await self._transact(write)
        log.debug("session %s run %s: turn of %d messages stored", turn.session.key, run_id, len(message_rows))

    async def usage(self, session: Session) -> UsageTotals:
        i, o, cr, cw, cost, turns = await self._run(lambda db: db.execute(_USAGE_TOTALS, (session.id,)).fetchone())
        return UsageTotals(i, o, cr, cw, float(cost), turns)

    async def usage_since(self, person: str, since: float) -> tuple[int, float]:
        tokens, cost = await self._run(lambda db: db.execute(_PERSON_USAGE, (person, since)).fetchone())
        return int(tokens), float(cost)

    async def traces(self, session_key: str | None = None, last: int = 20) -> list[TraceRecord]:
        def read(db: sqlite3.Connection) -> list[TraceRecord]:
            if session_key is None:
                rows = db.execute(_LAST_TRACES, (last,)).fetchall()
            else:
                rows = db.execute(_LAST_SESSION_TRACES, (session_key, last)).fetchall()
            return [_trace(db, row) for row in reversed(rows)]

        return await self._run(read)

    # -- the BrowseStore and AuditStore ports (the dashboard) --------------------------

    async def sessions(self, search: str = "", limit: int = 100) -> list[SessionSummary]:
        return await self._run(partial(browse.sessions, search=search, limit=limit))

    async def session_log(self, session_id: int, limit: int = 500) -> SessionLog | None:
        return await self._run(partial(browse.session_log, session_id=session_id, limit=limit))

    async def trace(self, run_id: str) -> TraceRecord | None:
        def read(db: sqlite3.Connection) -> TraceRecord | None:
            rows = db.execute(_TRACE, (run_id,)).fetchall()
            return _trace(db, rows[0]) if rows else None

        return await self._run(read)

    async def daily_usage(self, since: float) -> UsageReport:
        return await self._run(partial(browse.daily_usage, since=since))

    async def failures(self, limit: int = 20) -> list[Failure]:
        return await self._run(partial(browse.failures, limit=limit))

    async def record_action(self, entry: AuditEntry) -> None:
        row = browse.action_row(entry)
        await self._transact(lambda db: db.execute(browse.INSERT_ACTION, row))

    async def actions(self, limit: int = 50) -> list[AuditEntry]:
        return await self._run(partial(browse.actions, limit=limit))

    # -- internals -------------------------------------------------------------------

    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError(f"store is not open: {self._path}")
        return self._db

    async def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """``operation`` on the connection's own thread: a whole read or transaction is one
        hop there and back, not one per statement (the hot path has ~5 per message, not ~18).
        aiosqlite's ``_execute`` is its one entry to that thread, the one its cursors use;
        ``tests/test_store_sqlite.py`` pins that it still behaves so."""
        db = self._conn()
        return await db._execute(operation, db._conn)  # noqa: SLF001

    def _own(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Start ``work`` (a write) in a task the store holds until it is done, so that no
        caller's cancellation can orphan it."""
        task = asyncio.ensure_future(work)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return task

    async def _read(self, operation: Op[T], *, snapshot: bool = False) -> T:
        """``operation`` on the connection's thread, in one hop; its statements never
        interleave with another operation's (one connection, one thread), snapshot or not."""
        return await self._run(partial(drive, operation=operation))

    async def _write(self, operation: Op[T]) -> T:
        """``operation`` in one IMMEDIATE transaction, in one hop (``_transact``)."""
        return await self._transact(partial(drive, operation=operation))

    async def _transact(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` in one IMMEDIATE transaction, shielded from cancellation: once
        queued, it runs to COMMIT or ROLLBACK whatever happens to its caller."""
        task = self._own(self._run(partial(_transaction, body, self._path)))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_log_abandoned_failure)
            raise


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


def _transaction(body: Callable[[sqlite3.Connection], T], path: str, db: sqlite3.Connection) -> T:
    db.execute("BEGIN IMMEDIATE")
    try:
        result = body(db)
        db.execute("COMMIT")
    except BaseException:
        try:
            db.execute("ROLLBACK")
        except sqlite3.OperationalError:  # no transaction: BEGIN failed or COMMIT went through
            log.debug("store %s: nothing to roll back", path)
        raise
    return result


def _trace(db: sqlite3.Connection, row: tuple[Any, ...]) -> TraceRecord:
    spans = tuple(
        Span(SpanKind(kind), name, started, duration, i, o, cost, bool(err), preview, cr, cw)
        for kind, name, started, duration, i, o, cost, err, preview, cr, cw in db.execute(_SPANS, (row[0],))
    )
    head = TraceRecord(*row[:12])  # the columns up to ``error``, in order
    return replace(head, spans=spans, cache_read_tokens=row[12], cache_write_tokens=row[13], why=row[14])


def _live(db: sqlite3.Connection, session: Session, limit: int | None) -> list[Any]:
    """The session's live (not compacted) message rows, oldest first: all, or the last ``limit``."""
    if limit is not None and limit < 0:
        raise ValueError(f"history limit must be >= 0, not {limit}")
    if limit == 0:
        return []
    if limit is None:
        return db.execute(_HISTORY, (session.id,)).fetchall()
    rows = db.execute(_HISTORY_LAST, (session.id, limit)).fetchall()
    rows.reverse()
    return rows


async def open_store(path: str | os.PathLike[str]) -> SQLiteStore:
    """Open (create, migrate) the store at ``path``; the caller must ``await store.close()``."""
    return await SQLiteStore(path).open()


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


def _log_abandoned_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("a store write whose caller was cancelled failed", exc_info=exc)


__all__ = ["MEMORY", "SQLiteStore", "drive", "inbound_from_json", "inbound_to_json", "open_store"]
