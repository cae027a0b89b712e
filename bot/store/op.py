"""A store operation, written once for both drivers (sans-I/O).

An operation is a generator: it yields requests (a statement with ``?`` placeholders and its
arguments) and is sent back each one's result; what it returns is the operation's result. It
does no I/O and holds no connection, so one function serves both stores: the SQLite driver
runs the whole generator on the connection's thread, one hop per operation
(``bot.store.sqlite``); the PostgreSQL driver runs it on a pooled connection, a write in one
transaction, numbering the placeholders (``bot.store.pg.base``). What the two spell
differently, an operation asks its ``Engine`` (``bot.store.engine``).

    def title(session_id: int) -> Op[str | None]:
        found = yield from value("SELECT title FROM session_titles WHERE session_id = ?", session_id)
        return None if found is None else str(found)

Each core port's operations live in its module (``inbound``, ``history``, ``answers``, ``pairing``,
``models``, ``notes``) with a mixin of its async methods on ``Driven`` (a capability runs its own
through ``AppStore.read`` and ``write``); ``bot.store.operations.Operations`` is all of them, and each
driver is that class and its plumbing (no driver writes an operation of its own: tests/test_store_once.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from bot.store.base import LaneLost, Turn
from bot.store.engine import Engine
from bot.store.schema_steps import Claimant

log = logging.getLogger(__name__)

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class TurnGuard:
    """What a turn's commit checks in the statement that writes it (PostgreSQL with several
    instances, ``bot.store.pg.history``): ``parts``, WITH parts (``name AS (...)``, ``?``
    placeholders, ``args`` in order) of which ``held`` names the one that has a row when the turn
    may commit; every write of the turn is made on that condition, and ``check`` is given the row
    of ``result`` (SQL expressions over the parts) and raises when the turn may not commit."""

    parts: str
    args: tuple[Any, ...]
    held: str
    result: str
    check: Callable[[Row], None]


@dataclass(frozen=True, slots=True)
class Fetch:
    """Run ``sql``; its rows, as tuples."""

    sql: str
    args: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Count:
    """Run ``sql`` (an INSERT, UPDATE or DELETE, or a command such as SAVEPOINT); how many rows it changed."""

    sql: str
    args: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Many:
    """Run ``sql`` once for each of ``rows``; nothing comes back."""

    sql: str
    rows: Sequence[Sequence[Any]]


Request = Fetch | Count | Many
Op = Generator[Request, Any, T]  # yields requests, is sent their results, returns its own


def rows(sql: str, *args: Any) -> Op[list[Row]]:
    found: list[Row] = yield Fetch(sql, args)
    return found


def one(sql: str, *args: Any) -> Op[Row | None]:
    """The first row, or None."""
    found: list[Row] = yield Fetch(sql, args)
    return found[0] if found else None


def value(sql: str, *args: Any) -> Op[Any]:
    """The first column of the first row, or None."""
    found: list[Row] = yield Fetch(sql, args)
    return found[0][0] if found else None


def count(sql: str, *args: Any) -> Op[int]:
    changed: int = yield Count(sql, args)
    return changed


def inserted(sql: str, *args: Any) -> Op[int | None]:
    """The id of the row ``sql`` (an INSERT of one row into a table keyed by ``id``) inserted, or
    None when it inserted nothing (``ON CONFLICT ... DO NOTHING``)."""
    return (yield from value(f"{sql} RETURNING id", *args))


def execute(sql: str, *args: Any) -> Op[None]:
    yield Count(sql, args)


def many(sql: str, rows: Sequence[Sequence[Any]]) -> Op[None]:
    if rows:
        yield Many(sql, rows)


class Driven:
    """What the ports' operation mixins need of a driver, and the plumbing both drivers share: its
    engine, a read, a write (one transaction, run to its end even when its caller is cancelled),
    the tasks it holds, and the PostgreSQL driver's hooks for several instances (none on SQLite)."""

    engine: ClassVar[Engine]
    where: str  # the database, in messages and logs (no password)
    claimant: Claimant | None = None  # who claims work in the database (PostgreSQL: ``claim_as``); None: SQLite
    _writes: set[asyncio.Task[Any]]  # in flight, held so none is orphaned; ``close`` waits for them

    async def open(self) -> Self:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _read(self, operation: Op[T], *, snapshot: bool = False) -> T:
        """``operation`` outside a transaction; ``snapshot``: its statements see one moment
        (where the driver can tell them apart; SQLite's one connection never interleaves)."""
        raise NotImplementedError

    async def _write(self, operation: Op[T], *, alone: bool = False) -> T:
        """``operation`` in one transaction, shielded from the caller's cancellation. ``alone``: it
        is one statement (atomic by itself), so a driver that talks to a server may send it without
        BEGIN and COMMIT (two round trips fewer); a second statement is then an error."""
        raise NotImplementedError

    def _own(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` in a task the store holds until it is done (``close`` waits for it), so that
        no caller's cancellation can orphan it."""
        task = asyncio.ensure_future(work)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return task

    async def _shielded(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` (a write) in a task the store holds, shielded: once started, it runs to COMMIT or
        ROLLBACK whatever happens to its caller (who still sees the cancellation)."""
        task = self._own(work)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_log_abandoned_failure)
            raise

    def _turn_guard(self, turn: Turn) -> TurnGuard | None:
        """What a turn that adds to its conversation checks first, in its transaction (PostgreSQL
        with several instances: its lane's lease, ``bot.store.pg.history``); None: nothing."""
        return None


def _log_abandoned_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        if isinstance(exc, LaneLost):  # the caller's lane was ended for the same reason: nothing to fix
            log.warning("%s", exc)
        else:
            log.error("a store write whose caller was cancelled failed", exc_info=exc)
