"""Answers and their chunks in SQL: the statements and the row <-> ``Answer`` mapping.

Shared by the SQLite store (and a future PostgreSQL one). An answer is written in the
transaction of its turn; each chunk is recorded when the platform returns its message id;
the last one marks the answer delivered and its inbound rows answered, in one transaction.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from bot.messages import Answer, ChatType, Chunk, FileRef, Target
from bot.store.base import AnswerState

INSERT_ANSWER = (
    "INSERT INTO answers (id, platform, target, inbound_ids, draft_id, failed, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
INSERT_CHUNK = (
    "INSERT INTO chunks (answer_id, idx, text, file_name, file_data, file_ref, voice) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (answer_id, idx) DO NOTHING"
)
UNDELIVERED = (
    "SELECT id, platform, target, inbound_ids, draft_id, failed, created_at FROM answers"
    " WHERE delivered_at IS NULL ORDER BY created_at, rowid"
)
CHUNKS_OF = (
    "SELECT text, file_name, file_data, sent_at, file_ref, voice FROM chunks WHERE answer_id = ? ORDER BY idx"
)
ANSWER_STATE = "SELECT delivered_at IS NOT NULL, given_up FROM answers WHERE id = ?"
CHUNK_SENT = "UPDATE chunks SET message_id = ?, sent_at = ? WHERE answer_id = ? AND idx = ? AND sent_at IS NULL"
ANSWER_DONE = "UPDATE answers SET delivered_at = ?, given_up = ? WHERE id = ? AND delivered_at IS NULL"
INBOUND_OF = "SELECT inbound_ids FROM answers WHERE id = ?"
FORGET_INBOUND = "UPDATE inbound SET payload = '', answered_at = COALESCE(answered_at, ?) WHERE id = ?"
PRUNE_FORGOTTEN = "DELETE FROM inbound WHERE payload = '' AND received_at < ?"
KEEP_AS_CONTEXT = "UPDATE inbound SET context = 1, answered_at = COALESCE(answered_at, ?) WHERE id = ?"
PRUNE_CONTEXT = "DELETE FROM inbound WHERE context = 1 AND received_at < ?"
UPDATE_INBOUND = "UPDATE inbound SET payload = ? WHERE id = ?"


def answer_rows(answer: Answer) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """(the answers row, the chunks rows) to insert."""
    row = (answer.id, answer.platform, json.dumps(asdict(answer.target)), json.dumps(list(answer.inbound_ids)),
           answer.draft_id, int(answer.failed), answer.created_at)
    chunks = [(answer.id, i, c.text, c.file_name, c.file_data,
               json.dumps(asdict(c.file_ref)) if c.file_ref is not None else None, int(c.voice))
              for i, c in enumerate(answer.chunks)]
    return row, chunks


def answer_from(row: tuple[Any, ...], chunk_rows: list[tuple[Any, ...]]) -> Answer:
    id_, platform, target, inbound_ids, draft_id, failed, created_at = row
    t = json.loads(target)
    sent = 0
    while sent < len(chunk_rows) and chunk_rows[sent][3] is not None:
        sent += 1
    return Answer(
        id=id_, platform=platform,
        target=Target(t["chat_id"], ChatType(t["chat_type"]), t.get("thread_id"), t.get("reply_to")),
        chunks=tuple(Chunk(text, name, data, FileRef(**json.loads(ref)) if ref else None, bool(voice))
                     for text, name, data, _, ref, voice in chunk_rows),
        inbound_ids=tuple(json.loads(inbound_ids)), draft_id=draft_id, failed=bool(failed), sent=sent,
        created_at=created_at,
    )


def state_of(row: tuple[Any, ...] | None) -> AnswerState | None:
    """``ANSWER_STATE``'s row as an ``AnswerState``."""
    if row is None:
        return None
    delivered, given_up = row
    return "given_up" if given_up else "delivered" if delivered else "owed"
