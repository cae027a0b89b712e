"""The store is written once: every port operation is one function of ``bot.store.operations``,
and a driver (SQLite, PostgreSQL) adds only its plumbing; what differs is one ``Engine``."""

from __future__ import annotations

import inspect
import sqlite3

import pytest

from bot.store import base
from bot.store.engine import POSTGRES, SQLITE
from bot.store.op import Count, Fetch, Many, Op, count, many, rows
from bot.store.operations import Operations
from bot.store.pg import PostgresStore
from bot.store.sqlite import SQLiteStore, drive

LIFECYCLE = {"open", "close", "apply_steps"}  # a driver's own: it opens (and backs up, SQLite) its database its way


def operations() -> set[str]:
    """Every method of the store's ports (``AppStore`` and the Protocols it is made of)."""
    ports = (base.__name__, "bot.store.reports", "bot.store.schema_steps")
    return {name for cls in base.AppStore.__mro__ if cls.__module__ in ports and cls is not base.AppStore
            for name, member in vars(cls).items() if not name.startswith("_") and inspect.isfunction(member)}


def driver_side(driver: type) -> list[type]:
    """The classes of ``driver`` that are not the shared operations: its plumbing."""
    return [cls for cls in driver.__mro__ if cls not in Operations.__mro__]


def own(driver: type) -> set[str]:
    return {name for cls in driver_side(driver) for name, member in vars(cls).items()
            if inspect.isfunction(member) or isinstance(member, property)}


def test_no_store_operation_is_written_twice() -> None:
    ops = operations()
    assert len(ops) > 30  # it sees the ports (fewer as capabilities take theirs)
    for driver in (SQLiteStore, PostgresStore):
        assert own(driver) & ops <= LIFECYCLE, driver  # a driver writes no operation of its own
    for name in ops - LIFECYCLE:
        written = getattr(Operations, name)
        assert getattr(SQLiteStore, name) is written and getattr(PostgresStore, name) is written, name
        assert inspect.getmodule(written).__name__.startswith("bot.store."), name  # type: ignore[union-attr]
        assert "raise NotImplementedError" not in inspect.getsource(written), name


def test_the_two_drivers_share_only_the_drivers_methods() -> None:
    shared = own(SQLiteStore) & own(PostgresStore)
    assert shared == {"__init__", "open", "close", "_read", "_write"}


def test_an_operation_is_statements_yielded_and_results_received() -> None:
    def insert_and_read(values: list[tuple[int]]) -> Op[tuple[int, list[tuple[int]]]]:
        yield from many("INSERT INTO t (x) VALUES (?)", values)
        changed = yield from count("UPDATE t SET x = x + ? WHERE x > ?", 10, 1)
        return changed, (yield from rows("SELECT x FROM t ORDER BY x"))

    op = insert_and_read([(1,), (2,), (3,)])  # by hand: what a driver does
    assert next(op) == Many("INSERT INTO t (x) VALUES (?)", [(1,), (2,), (3,)])
    assert op.send(None) == Count("UPDATE t SET x = x + ? WHERE x > ?", (10, 1))
    assert op.send(2) == Fetch("SELECT x FROM t ORDER BY x", ())
    with pytest.raises(StopIteration) as done:
        op.send([(1,), (12,), (13,)])
    assert done.value.value == (2, [(1,), (12,), (13,)])

    db = sqlite3.connect(":memory:")  # and the SQLite driver, on a connection
    db.execute("CREATE TABLE t (x INTEGER)")
    assert drive(db, insert_and_read([(1,), (2,), (3,)])) == (2, [(1,), (12,), (13,)])


@pytest.mark.parametrize(("engine", "where", "args"), [
    (SQLITE, "id IN (?, ?, ?)", (1, 2, 3)),
    (POSTGRES, "id = ANY(?::bigint[])", ([1, 2, 3],)),
])
def test_a_list_parameter_is_the_dialects(engine: object, where: str, args: tuple[object, ...]) -> None:
    assert engine.any_of("id", [1, 2, 3], "bigint") == (where, args)  # type: ignore[attr-defined]


def test_several_rows_by_one_statement_are_the_dialects() -> None:
    rows_ = [("a", 1.5), ("b", 2.5)]
    assert SQLITE.values(("text", "float8"), rows_) == ("VALUES (?, ?), (?, ?)", ("a", 1.5, "b", 2.5))
    assert POSTGRES.values(("text", "float8"), rows_) == ("SELECT * FROM unnest(?::text[], ?::float8[])",
                                                          (["a", "b"], [1.5, 2.5]))
