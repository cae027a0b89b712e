"""A migration, written once for both databases: its name, its SQL with type tokens, and how
it is rendered for a engine and split into statements.

The core's migrations are ``bot.store.migrations.MIGRATIONS`` (numbered, applied in order);
a capability package's are in its spec (``CapabilitySpec.migrations``, named
``<capability>/NNNN_what``) and applied by name (``bot.store.steps``). This module imports
nothing heavy, so that a spec may declare its tables without loading a driver.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from bot.store.engine import Engine

_TOKEN = re.compile(r"\{(\w+)\}")
T = TypeVar("T")


class Migration(NamedTuple):
    """A named step of the schema: ``sql`` for both engines, its column types written as tokens
    (``{id}``, ``{real}``, ``{int8}``, ``{blob}``) that ``render`` spells in the engine's words
    (``Engine.types``), then what only one of them runs (indexes and columns that only
    several PostgreSQL instances use; what SQLite's history left)."""

    name: str
    sql: str
    sqlite: str = ""
    postgres: str = ""


def render(migration: Migration, engine: Engine) -> str:
    """The migration's SQL in ``engine``: its own statements, then the engine's."""
    own = migration.sqlite if engine.name == "sqlite" else migration.postgres
    return _TOKEN.sub(lambda m: engine.types.get(m.group(1), m.group(0)), f"{migration.sql}\n{own}")


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements, dropping empty and comment-only ones."""
    statements: list[str] = []
    buffer = ""
    for piece in sql.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if _has_code(buffer):
                statements.append(buffer.strip())
            buffer = ""
    if _has_code(buffer):
        raise ValueError(f"incomplete SQL statement at the end of a migration: {buffer.strip()!r}")
    return statements


def _has_code(statement: str) -> bool:
    lines = (line.split("--", 1)[0] for line in statement.splitlines())
    return any(line.strip(" \t;") for line in lines)


@dataclass(frozen=True, slots=True)
class Claimant:
    """Who claims work in a PostgreSQL database (rows that one instance runs and another takes over
    when it dies): ``instance`` ("" alone on the database), since when this life of it claims, and
    the lease after which a silent instance's work may be taken over (``bot.store.pg.sql.alive``)."""

    instance: str = ""
    since: float = 0.0
    lease_seconds: float = 15.0


class StepStore(Protocol):
    """What a capability package's port runs on (``bot.store.steps``): its operations (generators
    of ``bot.store.op`` requests) and its migrations."""

    @property
    def where(self) -> str: ...

    @property
    def claimant(self) -> Claimant | None:
        """Who claims work here (PostgreSQL); None on SQLite (one process, its rows name no claimer)."""
        ...

    @property
    def engine(self) -> Engine:
        """How the database spells what differs (an operation that must choose asks it)."""
        ...

    async def read(self, operation: Generator[Any, Any, T], *, snapshot: bool = False) -> T: ...

    async def write(self, operation: Generator[Any, Any, T]) -> T: ...

    async def apply_steps(self, owner: str, steps: Sequence[Migration]) -> int: ...
