"""The answers' SQL and reads the cluster shares with the PostgreSQL store (``bot.cluster.work``)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from bot.messages import Answer
from bot.store import answers as sql
from bot.store.dialect import POSTGRES
from bot.store.pg.base import Connection, drive
from bot.store.pg.sql import numbered

UNDELIVERED = sql.undelivered_sql(POSTGRES)
INSERT_ANSWER = numbered(sql.INSERT_ANSWER)
INSERT_CHUNK = numbered(sql.INSERT_CHUNK)


async def answers_of(conn: Connection, rows: Sequence[asyncpg.Record]) -> list[Answer]:
    """``answers`` rows (UNDELIVERED's columns) with their chunks, as ``Answer``s."""
    return await drive(conn, sql.with_chunks(POSTGRES, [tuple(r) for r in rows]))


async def insert_answer(conn: Connection, answer: Answer) -> None:
    """Store ``answer`` in the caller's transaction (a turn, a claim, a job's move)."""
    await drive(conn, sql.insert_answer(answer))
