"""What is owed to chats (the AnswerStore port) on PostgreSQL: answers, chunks, the ledger."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import asyncpg

from bot.messages import Answer
from bot.store import answers as sql
from bot.store.base import AnswerState
from bot.store.pg.base import Connection, PgBase
from bot.store.pg.inbound import MARK_ANSWERED
from bot.store.pg.sql import numbered

INSERT_ANSWER = numbered(sql.INSERT_ANSWER)
INSERT_CHUNK = numbered(sql.INSERT_CHUNK)
UNDELIVERED = ("SELECT id, platform, target, inbound_ids, draft_id, failed, created_at FROM answers"
               " WHERE delivered_at IS NULL ORDER BY created_at, seq")
_CHUNKS = ("SELECT answer_id, text, file_name, file_data, sent_at, file_ref, voice FROM chunks"
           " WHERE answer_id = ANY($1::text[]) ORDER BY answer_id, idx")
_CHUNK_SENT = numbered(sql.CHUNK_SENT)
_ANSWER_DONE = numbered(sql.ANSWER_DONE)
_ANSWER_STATE = numbered(sql.ANSWER_STATE)


class PgAnswers(PgBase):
    async def store_answer(self, answer: Answer) -> None:
        await self._transact(lambda conn: insert_answer(conn, answer))

    async def undelivered(self) -> list[Answer]:
        async def read(conn: Connection) -> list[Answer]:
            rows = await conn.fetch(UNDELIVERED)
            return await answers_of(conn, rows)

        return await self._with_conn(read)

    async def chunk_sent(self, answer: Answer, index: int, message_id: str | None) -> None:
        now = time.time()
        last = index == len(answer.chunks) - 1

        async def write(conn: Connection) -> None:
            await conn.execute(_CHUNK_SENT, message_id, now, answer.id, index)
            if last:
                await _settle(conn, answer, now, given_up=False)

        await self._transact(write)

    async def give_up(self, answer: Answer) -> None:
        now = time.time()
        await self._transact(lambda conn: _settle(conn, answer, now, given_up=True))

    async def answer_state(self, answer_id: str) -> AnswerState | None:
        row = await self.pool.fetchrow(_ANSWER_STATE, answer_id)
        return sql.state_of(tuple(row) if row is not None else None)


async def insert_answer(conn: Connection, answer: Answer) -> None:
    """Store ``answer`` in the caller's transaction (a turn, a claim, a job's move)."""
    row, chunks = sql.answer_rows(answer)
    await conn.execute(INSERT_ANSWER, *row)
    await conn.executemany(INSERT_CHUNK, chunks)


async def answers_of(conn: Connection, rows: Sequence[asyncpg.Record]) -> list[Answer]:
    """``answers`` rows (UNDELIVERED's columns) with their chunks, as ``Answer``s."""
    chunks: dict[str, list[tuple[Any, ...]]] = {}
    for c in await conn.fetch(_CHUNKS, [row["id"] for row in rows]):
        chunks.setdefault(c["answer_id"], []).append(tuple(c)[1:])
    return [sql.answer_from(tuple(row), chunks.get(row["id"], [])) for row in rows]


async def _settle(conn: Connection, answer: Answer, now: float, *, given_up: bool) -> None:
    await conn.execute(_ANSWER_DONE, now, int(given_up), answer.id)
    if answer.inbound_ids:
        await conn.execute(MARK_ANSWERED, now, list(answer.inbound_ids))
