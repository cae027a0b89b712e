"""Applying the store's migrations to PostgreSQL.

``bot.store.migrations.MIGRATIONS`` is the one ordered list, written once; ``DIALECT`` is
each one rendered in PostgreSQL's words, in the same order.

The applied migrations are the rows of ``migrations`` (id, name, applied_at). Start-up reads
them first and issues no DDL when none is missing, so the bot may run as a role with data rights
only (``chatgate migrate --to`` applies them as the database's owner). Pending ones are applied
in one transaction under an advisory lock, so instances starting together migrate once, and a
database is either fully upgraded or untouched; a role that may not apply them is told, in one
line, to run ``chatgate migrate``.

Types: ids are ``BIGINT`` identities (given explicitly by ``chatgate migrate``, then the
sequences are moved past them), times ``DOUBLE PRECISION`` epoch seconds as in SQLite, flags
``INTEGER`` 0/1 and JSON ``TEXT``, so rows map the same way in both engines.
"""

from __future__ import annotations

import logging
import time

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.errors import SchemaTooNewError, StoreCorruptError, StoreError
from bot.store.engine import POSTGRES
from bot.store.migrations import MIGRATIONS, MIGRATIONS_TABLE, render

log = logging.getLogger(__name__)

MIGRATE_LOCK = 0x63686174676174  # pg_advisory_xact_lock key: "chatgat"

DIALECT: dict[str, str] = {m.name: render(m, POSTGRES) for m in MIGRATIONS}  # each migration's PostgreSQL SQL
_CREATE_MIGRATIONS_TABLE = render(MIGRATIONS_TABLE, POSTGRES)
_FOREIGN_TABLES = ("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
                   " AND table_name <> 'migrations' AND table_name NOT LIKE 'cluster\\_%'")


# Whether a table exists, read from the catalog with this statement's snapshot. Not to_regclass: it
# looks the name up in the backend's cache without a lock, so after waiting on the advisory lock
# for an instance that made the table meanwhile, it can still say "none" from a stale cache entry.
HAS_TABLE = ("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = "
             "c.relnamespace WHERE n.nspname = current_schema() AND c.relname = $1)")


def names() -> tuple[str, ...]:
    """The migrations this chatgate knows, in order (the one list, ``MIGRATIONS``)."""
    return tuple(m.name for m in MIGRATIONS)


MIGRATE_HINT = ("run `chatgate migrate --to postgresql://...` as a role that may create tables (the database's "
                "owner), then start again; the bot itself needs only SELECT, INSERT, UPDATE and DELETE")


async def apply(conn: asyncpg.Connection | PoolConnectionProxy, where: str) -> int:
    """Bring the database up to every known migration; how many were applied now. Nothing but
    reads when none is missing."""
    known = names()
    if _check(await _applied(conn), known, where) == len(known):
        return 0
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATE_LOCK)
        applied = _check(await _applied(conn), known, where)  # another instance may have migrated meanwhile
        if not applied and await conn.fetchval(_FOREIGN_TABLES):
            raise StoreCorruptError(f"{where} holds tables that are not chatgate's; use an empty database")
        pending = known[applied:]
        try:
            if pending:
                await conn.execute(_CREATE_MIGRATIONS_TABLE)
            for number, name in enumerate(pending, start=applied + 1):
                log.info("applying migration %d %s to %s", number, name, where)
                await conn.execute(DIALECT[name])
                await conn.execute("INSERT INTO migrations (id, name, applied_at) VALUES ($1, $2, $3)",
                                   number, name, time.time())
        except asyncpg.InsufficientPrivilegeError:
            which = f"1 migration ({pending[0]}) is" if len(pending) == 1 else \
                f"{len(pending)} migrations ({pending[0]}, ...) are"
            raise StoreError(f"{where}: {which} pending and this role may not apply them; {MIGRATE_HINT}") from None
    return len(known) - applied


async def _applied(conn: asyncpg.Connection | PoolConnectionProxy) -> list[str]:
    """The names of the migrations the database records, in order (none without the table)."""
    if not await conn.fetchval(HAS_TABLE, "migrations"):
        return []
    return [r["name"] for r in await conn.fetch("SELECT name FROM migrations ORDER BY id")]


def _check(applied: list[str], known: tuple[str, ...], where: str) -> int:
    """How many of ``known`` are applied; ``SchemaTooNewError`` for a schema this chatgate did not write."""
    if len(applied) > len(known) or applied != list(known[:len(applied)]):
        raise SchemaTooNewError(
            f"{where} has schema version {len(applied)} ({applied[-1] if applied else 'none'}), not one this "
            f"chatgate wrote (it knows up to version {len(known)}): upgrade chatgate or use another database")
    return len(applied)
