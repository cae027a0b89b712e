"""What is owed to chats (the ``AnswerStore`` port), written once for both stores: answers and
their chunks, the delivery ledger.

An answer is written in the transaction of its turn (or on its own, a notice); each chunk is
recorded when the platform returns its message id; the last one marks the answer delivered
and its inbound rows answered, in one transaction.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from bot.messages import Answer, ChatType, Chunk, FileRef, Purpose, Target
from bot.store.base import AnswerState
from bot.store.engine import Engine
from bot.store.inbound import MARK_ANSWERED, mark_answered
from bot.store.op import Driven, Op, Row, execute, many, one, rows

INSERT_ANSWER = (
    "INSERT INTO answers (id, platform, target, inbound_ids, draft_id, failed, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
INSERT_CHUNK = (
    "INSERT INTO chunks (answer_id, idx, text, file_name, file_data, file_ref, voice) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (answer_id, idx) DO NOTHING"
)
_UNDELIVERED = ("SELECT id, platform, target, inbound_ids, draft_id, failed, created_at FROM answers"
                " WHERE delivered_at IS NULL ORDER BY created_at, {order}")
_CHUNKS = ("SELECT answer_id, text, file_name, file_data, sent_at, file_ref, voice FROM chunks WHERE {ids}"
           " ORDER BY answer_id, idx")
_SENT_AS = ("SELECT a.id, a.platform, a.target, a.inbound_ids, a.draft_id, a.failed, a.created_at, c.idx"
            " FROM chunks c JOIN answers a ON a.id = c.answer_id WHERE c.message_id = ? AND a.platform = ?")
ANSWER_STATE = "SELECT delivered_at IS NOT NULL, given_up FROM answers WHERE id = ?"
CHUNK_SENT = "UPDATE chunks SET message_id = ?, sent_at = ? WHERE answer_id = ? AND idx = ? AND sent_at IS NULL"
ANSWER_DONE = "UPDATE answers SET delivered_at = ?, given_up = ? WHERE id = ? AND delivered_at IS NULL"
_IDS_AT_ONCE = 500  # answers whose chunks one statement reads
# how a file chunk is shown, in the chunks table's ``voice`` column (a photo is one more way to show a file)
_AS_FILE, _AS_VOICE, _AS_PHOTO = 0, 1, 2


def _shown(chunk: Chunk) -> int:
    return _AS_VOICE if chunk.voice else _AS_PHOTO if chunk.photo else _AS_FILE


def undelivered_sql(d: Engine) -> str:
    """The answers not fully delivered, in the order they were stored."""
    return _UNDELIVERED.format(order=d.stored_order)


def answer_rows(answer: Answer) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """(the answers row, the chunks rows) to insert."""
    row = (answer.id, answer.platform, json.dumps(asdict(answer.target)), json.dumps(list(answer.inbound_ids)),
           answer.draft_id, int(answer.failed), answer.created_at)
    chunks = [(answer.id, i, c.text, c.file_name, c.file_data,
               json.dumps(asdict(c.file_ref)) if c.file_ref is not None else None, _shown(c))
              for i, c in enumerate(answer.chunks)]
    return row, chunks


def answer_from(row: Row, chunk_rows: list[Row]) -> Answer:
    id_, platform, target, inbound_ids, draft_id, failed, created_at = row
    t = json.loads(target)
    sent = next((i for i, c in enumerate(chunk_rows) if c[3] is None), len(chunk_rows))  # the delivered prefix
    return Answer(
        id=id_, platform=platform,
        target=Target(t["chat_id"], ChatType(t["chat_type"]), t.get("thread_id"), t.get("reply_to"),
                      Purpose(t.get("purpose", Purpose.ANSWER))),
        chunks=tuple(Chunk(text, name, data, FileRef(**json.loads(ref)) if ref else None, shown == _AS_VOICE,
                           shown == _AS_PHOTO)
                     for text, name, data, _, ref, shown in chunk_rows),
        inbound_ids=tuple(json.loads(inbound_ids)), draft_id=draft_id, failed=bool(failed), sent=sent,
        created_at=created_at,
    )


def insert_answer(answer: Answer) -> Op[None]:
    """Store ``answer`` (in the caller's transaction: a turn, a claim, a job's move); again: nothing changes."""
    row, chunks = answer_rows(answer)
    yield from execute(INSERT_ANSWER, *row)
    yield from many(INSERT_CHUNK, chunks)


def with_chunks(d: Engine, answer_rows: list[Row]) -> Op[list[Answer]]:
    """``answers`` rows (``undelivered_sql``'s columns) with their chunks, as ``Answer``s."""
    chunks: dict[str, list[Row]] = {}
    ids = [row[0] for row in answer_rows]
    for start in range(0, len(ids), _IDS_AT_ONCE):
        where, args = d.any_of("answer_id", ids[start:start + _IDS_AT_ONCE], "text")
        for c in (yield from rows(_CHUNKS.format(ids=where), *args)):
            chunks.setdefault(c[0], []).append(c[1:])
    return [answer_from(row, chunks.get(row[0], [])) for row in answer_rows]


def undelivered(d: Engine) -> Op[list[Answer]]:
    return (yield from with_chunks(d, (yield from rows(undelivered_sql(d)))))


def sent_as(d: Engine, platform: str, message_id: str) -> Op[tuple[Answer, int] | None]:
    """The stored answer whose chunk ``platform`` took as ``message_id``, and that chunk's index."""
    found = yield from rows(_SENT_AS, message_id, platform)
    return ((yield from with_chunks(d, [found[0][:7]]))[0], found[0][7]) if found else None


def settle(d: Engine, answer: Answer, now: float, *, given_up: bool) -> Op[None]:
    yield from execute(ANSWER_DONE, now, int(given_up), answer.id)
    yield from mark_answered(d, answer.inbound_ids, now)


def sent_alone(d: Engine, answer: Answer, index: int) -> bool:
    """``chunk_sent`` is one statement: a chunk but the last, or the last where the engine writes
    the chunk, the answer and its inbound messages in one (PostgreSQL)."""
    return index < len(answer.chunks) - 1 or (d.with_writes and bool(answer.inbound_ids))


def chunk_sent(d: Engine, answer: Answer, index: int, message_id: str | None, now: float) -> Op[None]:
    last = index == len(answer.chunks) - 1
    if last and sent_alone(d, answer, index):
        where, ids = d.any_of("id", answer.inbound_ids, "bigint")
        yield from execute(f"WITH c AS ({CHUNK_SENT}), a AS ({ANSWER_DONE}) {MARK_ANSWERED.format(ids=where)}",
                           message_id, now, answer.id, index, now, 0, answer.id, now, *ids)
        return
    yield from execute(CHUNK_SENT, message_id, now, answer.id, index)
    if last:
        yield from settle(d, answer, now, given_up=False)


class AnswerOps(Driven):
    """The hot path of delivery: one transaction per delivered chunk."""

    async def store_answer(self, answer: Answer) -> None:
        await self._write(insert_answer(answer))

    async def undelivered(self) -> list[Answer]:
        return await self._read(undelivered(self.engine))

    async def chunk_sent(self, answer: Answer, index: int, message_id: str | None) -> None:
        await self._write(chunk_sent(self.engine, answer, index, message_id, time.time()),
                          alone=sent_alone(self.engine, answer, index))

    async def give_up(self, answer: Answer) -> None:
        await self._write(settle(self.engine, answer, time.time(), given_up=True))

    async def sent_as(self, platform: str, message_id: str) -> tuple[Answer, int] | None:
        return await self._read(sent_as(self.engine, platform, message_id))

    async def answer_state(self, answer_id: str) -> AnswerState | None:
        found = await self._read(one(ANSWER_STATE, answer_id))
        if found is None:
            return None
        delivered, given_up = found
        return "given_up" if given_up else "delivered" if delivered else "owed"
