"""The answers' SQL and read that the cluster shares with the store (``bot.cluster.work``)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from bot.messages import Answer
from bot.store import answers as sql
from bot.store.engine import POSTGRES
from bot.store.pg.base import Connection, drive

UNDELIVERED = sql.undelivered_sql(POSTGRES)


async def answers_of(conn: Connection, rows: Sequence[asyncpg.Record]) -> list[Answer]:
    """``answers`` rows (UNDELIVERED's columns) with their chunks, as ``Answer``s."""
    return await drive(conn, sql.with_chunks(POSTGRES, [tuple(r) for r in rows]))
