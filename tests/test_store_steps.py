"""A capability's own tables and operations on the one store (bot.store.steps), on both drivers:
its migrations applied by name once, a newer database refused, its operations written once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.errors import SchemaTooNewError
from bot.store.op import Op, execute, rows
from bot.store.pg import PostgresStore
from bot.store.schema_steps import Migration
from bot.store.sqlite import SQLiteStore
from tests.pg import fresh_database

pytestmark = pytest.mark.timeout(60)

NOTES = (
    Migration("notes/0001_notes", "CREATE TABLE notes_items (id {id}, text TEXT NOT NULL, at {real} NOT NULL);"),
    Migration("notes/0002_tag", "ALTER TABLE notes_items ADD COLUMN tag TEXT NOT NULL DEFAULT '';"),
)


def add(text: str, tag: str) -> Op[None]:
    yield from execute("INSERT INTO notes_items (text, at, tag) VALUES (?, ?, ?)", text, 1.0, tag)


def tagged(tag: str) -> Op[list[str]]:
    found = yield from rows("SELECT text FROM notes_items WHERE tag = ? ORDER BY id", tag)
    return [str(r[0]) for r in found]


@asynccontextmanager
async def opened(kind: str, tmp_path: Path) -> AsyncIterator[SQLiteStore | PostgresStore]:
    if kind == "sqlite":
        async with SQLiteStore(tmp_path / "db.sqlite") as store:
            yield store
    else:
        async with fresh_database() as url, PostgresStore(url, pool_size=2) as pg:
            yield pg


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_capability_brings_its_tables_and_operations(kind: str, tmp_path: Path) -> None:
    async with opened(kind, tmp_path) as store:
        assert await store.apply_steps("notes", NOTES[:1]) == 1
        assert await store.apply_steps("notes", NOTES) == 1  # only the new one
        assert await store.apply_steps("notes", NOTES) == 0  # nothing twice
        await store.write(add("milk", "shop"))
        await store.write(add("call", "home"))
        assert await store.read(tagged("shop")) == ["milk"]
        with pytest.raises(SchemaTooNewError, match="notes/0002_tag"):
            await store.apply_steps("notes", NOTES[:1])  # an older chatgate on this database
        with pytest.raises(ValueError, match="notes/NNNN_what"):
            await store.apply_steps("notes", (Migration("0001_x", "SELECT 1"),))


async def test_the_steps_survive_a_restart_of_sqlite(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        await store.apply_steps("notes", NOTES)
        await store.write(add("milk", "shop"))
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        assert await store.apply_steps("notes", NOTES) == 0
        assert await store.read(tagged("shop")) == ["milk"]
