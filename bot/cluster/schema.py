"""The cluster's own tables (PostgreSQL only): instances, leases, delivery claims, shared rate
buckets. They are not the store's (SQLite has no use for them), so they have their own ordered,
named migrations, recorded in ``cluster_migrations`` and applied under an advisory lock; like the
store's, only when one is missing (a runtime role with data rights only joins without DDL)."""

from __future__ import annotations

import time

import asyncpg

from bot.errors import StoreError
from bot.store.pg.base import Connection
from bot.store.pg.schema import HAS_TABLE, MIGRATE_HINT

LOCK = 0x636C7573746572  # pg_advisory_xact_lock key: "cluster"

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("c001_instances_leases", """
        CREATE TABLE cluster_instances (
            id         TEXT PRIMARY KEY,  -- cluster.instance, else host-pid
            host       TEXT NOT NULL,
            pid        INTEGER NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            seen_at    DOUBLE PRECISION NOT NULL,  -- its last heartbeat (the database's clock)
            stopped_at DOUBLE PRECISION            -- a clean stop; a killed one just stops being seen
        );
        -- what an instance owns: a session's lane ('session:<key>'), a poller, a shard...
        CREATE SEQUENCE cluster_fence;  -- fencing tokens: a lease that changes hands gets a higher one
        CREATE TABLE cluster_leases (
            name       TEXT PRIMARY KEY,
            holder     TEXT NOT NULL,
            token      BIGINT NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL  -- renewed by the holder's heartbeat
        );
        CREATE INDEX cluster_leases_holder ON cluster_leases (holder);
        -- which instance sends a stored answer (a dead one's are taken over)
        CREATE TABLE cluster_deliveries (
            answer_id  TEXT PRIMARY KEY,
            instance   TEXT NOT NULL,
            claimed_at DOUBLE PRECISION NOT NULL
        );
        -- per-person message rates, shared by every instance
        CREATE TABLE cluster_buckets (
            person   TEXT PRIMARY KEY,
            tokens   DOUBLE PRECISION NOT NULL,
            refilled DOUBLE PRECISION NOT NULL,
            taken    BOOLEAN NOT NULL  -- whether the last message found a token
        );
    """),
)


async def apply(conn: Connection) -> int:
    """The cluster's tables up to date; how many migrations were applied now (none: no DDL)."""
    if not await _pending(conn):
        return 0
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK)
        pending = await _pending(conn)
        try:
            if pending:
                await conn.execute("CREATE TABLE IF NOT EXISTS cluster_migrations (name TEXT PRIMARY KEY,"
                                   " applied_at DOUBLE PRECISION NOT NULL)")
            for name, sql in pending:
                await conn.execute(sql)
                await conn.execute("INSERT INTO cluster_migrations VALUES ($1, $2)", name, time.time())
        except asyncpg.InsufficientPrivilegeError:
            raise StoreError(f"the cluster's migration {pending[0][0]} is pending and this role may not apply it; "
                             f"{MIGRATE_HINT}") from None
    return len(pending)


async def _pending(conn: Connection) -> list[tuple[str, str]]:
    if not await conn.fetchval(HAS_TABLE, "cluster_migrations"):  # not to_regclass: see HAS_TABLE
        return list(MIGRATIONS)
    done = {r[0] for r in await conn.fetch("SELECT name FROM cluster_migrations")}
    return [(name, sql) for name, sql in MIGRATIONS if name not in done]
