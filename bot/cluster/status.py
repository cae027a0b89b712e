"""``chatgate status``: the instances of a cluster, what each owns, and how far behind it is."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from bot.store.pg.sql import NOW

_INSTANCES = (f"SELECT id, host, pid, {NOW} - started_at AS up, {NOW} - seen_at AS seen, stopped_at IS NOT NULL"
              " AS stopped FROM cluster_instances ORDER BY started_at")
_OWNED = (f"SELECT holder, name FROM cluster_leases WHERE expires_at >= {NOW} ORDER BY holder, name")
_WAITING = (f"SELECT count(*), coalesce(max({NOW} - received_at), 0) FROM inbound"
            " WHERE answered_at IS NULL AND payload <> ''")
_OWED = f"SELECT count(*), coalesce(max({NOW} - created_at), 0) FROM answers WHERE delivered_at IS NULL"
_HAS_CLUSTER = "SELECT to_regclass('cluster_instances') IS NOT NULL"


@dataclass(frozen=True, slots=True)
class InstanceStatus:
    id: str
    host: str
    pid: int
    up: float  # seconds since it started
    seen: float  # seconds since its last heartbeat
    alive: bool
    sessions: int  # session lanes it holds
    other: tuple[str, ...]  # other leases: pollers, shards


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    instances: tuple[InstanceStatus, ...]
    waiting: int  # messages stored and not answered yet (running, queued, or owed by a dead instance)
    oldest_waiting: float
    owed: int  # answers stored and not delivered yet
    oldest_owed: float


async def read_status(pool: asyncpg.Pool, lease_seconds: float) -> ClusterStatus:
    async with pool.acquire() as conn:
        instances: list[InstanceStatus] = []
        if await conn.fetchval(_HAS_CLUSTER):
            owned: dict[str, list[str]] = {}
            for holder, name in await conn.fetch(_OWNED):
                owned.setdefault(holder, []).append(name)
            for r in await conn.fetch(_INSTANCES):
                names = owned.get(r["id"], [])
                instances.append(InstanceStatus(
                    r["id"], r["host"], r["pid"], r["up"], r["seen"], not r["stopped"] and r["seen"] <= lease_seconds,
                    sum(n.startswith("session:") for n in names),
                    tuple(n for n in names if not n.startswith("session:"))))
        waiting, oldest_waiting = await conn.fetchrow(_WAITING) or (0, 0.0)
        owed, oldest_owed = await conn.fetchrow(_OWED) or (0, 0.0)
    return ClusterStatus(tuple(instances), waiting, oldest_waiting, owed, oldest_owed)


def format_status(status: ClusterStatus, where: str) -> str:
    alive = [i for i in status.instances if i.alive]
    lines = [f"cluster on {where}: {len(alive)} instance{'s' if len(alive) != 1 else ''} alive"]
    for i in status.instances:
        if i.alive:
            owns = f"{i.sessions} session{'s' if i.sessions != 1 else ''}" + "".join(f", {o}" for o in i.other)
            lines.append(f"  {i.id:<20} alive   pid {i.pid} on {i.host}, up {_ago(i.up)}, heartbeat {i.seen:.1f} s ago;"
                         f" owns {owns}")
        elif i.seen < 86400:
            lines.append(f"  {i.id:<20} gone    last seen {_ago(i.seen)} ago")
    lines.append(f"lag: {status.waiting} message{'s' if status.waiting != 1 else ''} not answered yet"
                 + (f" (oldest {_ago(status.oldest_waiting)})" if status.waiting else "")
                 + f"; {status.owed} answer{'s' if status.owed != 1 else ''} not delivered yet"
                 + (f" (oldest {_ago(status.oldest_owed)})" if status.owed else ""))
    return "\n".join(lines)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
