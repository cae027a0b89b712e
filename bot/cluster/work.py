"""What the cluster reads of the store's tables: a session's waiting messages (or a message handed
over in a notification instead), and the work a dead (or departed) instance left: messages of
sessions nobody holds, answers nobody sends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from bot.messages import Answer
from bot.store import answers as answer_sql
from bot.store.base import InboundRecord
from bot.store.engine import POSTGRES
from bot.store.inbound import inbound_from_json, inbound_to_json, not_owed, record_from
from bot.store.pg.base import Connection, Db, drive
from bot.store.pg.sql import NOW, alive

UNDELIVERED = answer_sql.undelivered_sql(POSTGRES)
NOT_OWED = not_owed(POSTGRES)  # of the inbound row ``i``

_WAITING = ("SELECT id, session_key, payload, received_at FROM inbound i WHERE session_key = $1"
            f" AND answered_at IS NULL AND payload <> '' AND {NOT_OWED} ORDER BY id")
_ORPHAN_SESSIONS = (
    "SELECT DISTINCT session_key FROM inbound i WHERE answered_at IS NULL AND payload <> ''"
    f" AND received_at < {NOW} - $1 AND {NOT_OWED}"
    f" AND NOT EXISTS (SELECT 1 FROM cluster_leases l WHERE l.name = 'session:' || i.session_key"
    f" AND l.expires_at >= {NOW}) LIMIT 500"
)
_ORPHAN_ANSWERS = (
    "SELECT a.id FROM answers a LEFT JOIN cluster_deliveries d ON d.answer_id = a.id WHERE a.delivered_at IS NULL"
    f" AND ((d.instance IS NULL AND a.created_at < {NOW} - $2) OR (d.instance IS NOT NULL AND NOT"
    f" {alive('d.instance')})) LIMIT 500"
)
_ANSWERS = UNDELIVERED.replace("WHERE delivered_at IS NULL", "WHERE delivered_at IS NULL AND id = ANY($1::text[])")
_CLAIM_ANSWER = (
    f"INSERT INTO cluster_deliveries (answer_id, instance, claimed_at) VALUES ($2, $3, {NOW})"
    " ON CONFLICT (answer_id) DO UPDATE SET instance = excluded.instance, claimed_at = excluded.claimed_at"
    f" WHERE cluster_deliveries.instance = excluded.instance OR NOT {alive('cluster_deliveries.instance')}"
    " RETURNING 1"
)
# what a handed message's JSON may take of a NOTIFY payload (PostgreSQL's limit is 8000 bytes; the
# notification quotes the JSON again, which can double it)
HANDED_ROOM = 3500
_PRUNE_CLAIMS = ("DELETE FROM cluster_deliveries d USING answers a WHERE a.id = d.answer_id"
                 " AND a.delivered_at IS NOT NULL")


async def waiting(db: Db, session_key: str) -> list[InboundRecord]:
    """The session's stored messages not answered and owed no answer, oldest first."""
    return [record_of(r) for r in await db.fetch(_WAITING, session_key)]


def handed(record: InboundRecord) -> dict[str, Any]:
    """A stored message as a ``pull`` notification carries it, so that the lane's holder need not
    read it back; nothing when it would not fit (the holder then reads the store)."""
    raw = inbound_to_json(record.message)  # ASCII: its length is its size
    return {"id": record.id, "msg": raw, "at": record.received_at} if len(raw) <= HANDED_ROOM else {}


def handed_in(message: Mapping[str, Any]) -> InboundRecord | None:
    """The message a ``pull`` notification carries (``handed``), if it carries one."""
    if "msg" not in message:
        return None
    return InboundRecord(int(message["id"]), str(message["key"]), inbound_from_json(str(message["msg"])),
                         float(message["at"]))


async def orphan_sessions(db: Db, grace: float) -> list[str]:
    """Sessions with messages waiting longer than ``grace`` seconds whose lane nobody holds."""
    return [r[0] for r in await db.fetch(_ORPHAN_SESSIONS, grace)]


async def orphan_answers(pool: asyncpg.Pool, lease_seconds: float) -> list[Answer]:
    """Undelivered answers whose sender died or stopped (or that nobody claimed for a lease's time)."""
    async with pool.acquire() as conn:
        ids = [r[0] for r in await conn.fetch(_ORPHAN_ANSWERS, lease_seconds, lease_seconds)]
        return await answers_of(conn, await conn.fetch(_ANSWERS, ids)) if ids else []


async def claim_answer(db: Db, answer_id: str, instance: str, lease_seconds: float) -> bool:
    return await db.fetchval(_CLAIM_ANSWER, lease_seconds, answer_id, instance) is not None


async def prune_claims(db: Db) -> None:
    await db.execute(_PRUNE_CLAIMS)


async def answers_of(conn: Connection, rows: Sequence[asyncpg.Record]) -> list[Answer]:
    """``answers`` rows (UNDELIVERED's columns) with their chunks, as ``Answer``s."""
    return await drive(conn, answer_sql.with_chunks(POSTGRES, [tuple(r) for r in rows]))


def record_of(row: asyncpg.Record) -> InboundRecord:
    """An ``inbound`` row (id, session_key, payload, received_at) as the message it stored."""
    return record_from(tuple(row))
