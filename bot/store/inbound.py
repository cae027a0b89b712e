"""The inbound log (the ``Store`` port's half about messages received), written once for both
stores: dedupe, group commit (``bot.store.batch``: the rows recorded in the same moment inserted by
one statement), what is still unanswered, and a message as stored (JSON)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields, replace
from typing import Any

from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender
from bot.store.base import InboundRecord, SessionOf, key_of
from bot.store.batch import GroupCommit
from bot.store.engine import Engine
from bot.store.op import Driven, Op, Row, count, execute, inserted, rows

log = logging.getLogger(__name__)

FORGOTTEN_KEPT = 7 * 86400.0  # seconds a refused or ignored message's dedupe key is kept
_INSERT = (
    "INSERT INTO inbound (platform, account, chat_id, message_id, session_key, payload, received_at) {source}"
    " ON CONFLICT (platform, account, chat_id, message_id) DO NOTHING"
)
_INSERT_ONE = _INSERT.format(source="VALUES (?, ?, ?, ?, ?, ?, ?)")
_INSERT_MANY = _INSERT + " RETURNING id, platform, account, chat_id, message_id"
_TYPES = ("text", "text", "text", "text", "text", "text", "float8")
MARK_ANSWERED = "UPDATE inbound SET answered_at = ? WHERE {ids} AND answered_at IS NULL"
_UNANSWERED = ("SELECT id, session_key, payload, received_at FROM inbound i"
               " WHERE answered_at IS NULL AND payload <> '' AND {not_owed} ORDER BY id")
FORGET_INBOUND = "UPDATE inbound SET payload = '', answered_at = COALESCE(answered_at, ?) WHERE id = ?"
PRUNE_FORGOTTEN = "DELETE FROM inbound WHERE payload = '' AND received_at < ?"
KEEP_AS_CONTEXT = "UPDATE inbound SET context = 1, answered_at = COALESCE(answered_at, ?) WHERE id = ?"
PRUNE_CONTEXT = "DELETE FROM inbound WHERE context = 1 AND received_at < ?"
UPDATE_INBOUND = "UPDATE inbound SET payload = ? WHERE id = ?"
_LAST_HEARD = ("SELECT payload, received_at FROM inbound WHERE platform = ? AND account = ? AND chat_id = ?"
               " ORDER BY id DESC LIMIT 1")
_AT_ONCE = 100  # rows (or ids) one statement takes: well under any SQLite's limit of parameters

InboundRow = tuple[str, str, str, str, str, str, float]


def not_owed(d: Engine) -> str:
    """SQL: the inbound row ``i`` is owed no stored, undelivered answer."""
    owed = d.json_has.format(array="a.inbound_ids", number="i.id")
    return f"NOT EXISTS (SELECT 1 FROM answers a WHERE a.delivered_at IS NULL AND {owed})"


def insert(d: Engine, arrived: Sequence[InboundRow]) -> Op[list[int | None]]:
    """A burst's rows; each one's id, None for a redelivery (the first of two equal keys in one
    burst gets the id, the second is a redelivery)."""
    if len(arrived) == 1:  # alone, as most are
        return [(yield from inserted(_INSERT_ONE, *arrived[0]))]
    ids: dict[tuple[Any, ...], int] = {}
    for start in range(0, len(arrived), _AT_ONCE):
        source, args = d.values(_TYPES, arrived[start:start + _AT_ONCE])
        for id_, *key in (yield from rows(_INSERT_MANY.format(source=source), *args)):
            ids.setdefault(tuple(key), id_)
    return [ids.pop(row[:4], None) for row in arrived]


def mark_answered(d: Engine, inbound_ids: Sequence[int], now: float) -> Op[None]:
    for start in range(0, len(inbound_ids), _AT_ONCE):
        where, args = d.any_of("id", inbound_ids[start:start + _AT_ONCE], "bigint")
        yield from execute(MARK_ANSWERED.format(ids=where), now, *args)


def unanswered(d: Engine, now: float) -> Op[list[InboundRecord]]:
    yield from execute(PRUNE_FORGOTTEN, now - FORGOTTEN_KEPT)
    return [record_from(r) for r in (yield from rows(_UNANSWERED.format(not_owed=not_owed(d))))]


def prune_context(before: float, now: float) -> Op[int]:
    gone = yield from count(PRUNE_CONTEXT, before)
    return gone + (yield from count(PRUNE_FORGOTTEN, now - FORGOTTEN_KEPT))


def last_heard(platform: str, account: str, chat_id: str) -> Op[float | None]:
    """When the person of a chat last wrote, as stored (by any instance, before any restart): the
    latest message's own time, at most its arrival (only the arrival for a forgotten one, whose
    payload is gone); None when nothing of the chat is stored."""
    found = yield from rows(_LAST_HEARD, platform, account, chat_id)
    if not found:
        return None
    payload, received_at = found[0]
    arrived = float(received_at)
    return min(inbound_from_json(payload).timestamp, arrived) if payload else arrived


def record_from(row: Row) -> InboundRecord:
    """An ``inbound`` row (id, session_key, payload, received_at) as the message it stored."""
    return InboundRecord(row[0], row[1], inbound_from_json(row[2]), row[3])


class InboundOps(Driven):
    _group: GroupCommit[InboundRow] | None = None  # the burst arriving now

    async def record_inbound(self, msg: InboundMessage, of: SessionOf) -> int | None:
        if self._group is None:
            self._group = GroupCommit(self._insert_inbound, self._own)
        row = (msg.platform, msg.account, msg.chat_id, msg.message_id, key_of(of), inbound_to_json(msg), time.time())
        inbound_id = await self._group.add(row)
        if inbound_id is None:
            log.info("inbound %s:%s:%s is a redelivery", msg.platform, msg.chat_id, msg.message_id)
        return inbound_id

    async def _insert_inbound(self, arrived: list[InboundRow]) -> list[int | None]:
        return await self._write(insert(self.engine, arrived), alone=len(arrived) <= _AT_ONCE)  # one statement

    async def update_inbound(self, inbound_id: int, msg: InboundMessage) -> None:
        await self._write(execute(UPDATE_INBOUND, inbound_to_json(msg), inbound_id))

    async def forget_inbound(self, inbound_id: int) -> None:
        await self._write(execute(FORGET_INBOUND, time.time(), inbound_id))

    async def keep_as_context(self, inbound_id: int) -> None:
        await self._write(execute(KEEP_AS_CONTEXT, time.time(), inbound_id))

    async def prune_context(self, before: float) -> int:
        return await self._write(prune_context(before, time.time()))

    async def mark_answered(self, inbound_ids: Iterable[int]) -> None:
        ids = list(inbound_ids)
        if ids:
            await self._write(mark_answered(self.engine, ids, time.time()))

    async def unanswered(self) -> list[InboundRecord]:
        return await self._write(unanswered(self.engine, time.time()))


def inbound_to_json(msg: InboundMessage) -> str:
    """The message as JSON, attachments without their inline ``data``."""
    stripped = replace(msg, attachments=tuple(replace(a, data=None) for a in msg.attachments))
    # ASCII JSON: text with lone surrogates (invalid UTF-8) is stored escaped, not lost
    return json.dumps(asdict(stripped), separators=(",", ":"))


def inbound_from_json(raw: str) -> InboundMessage:
    """Inverse of ``inbound_to_json``; keys a newer or older version wrote are ignored."""
    d: dict[str, Any] = json.loads(raw)
    d["chat_type"] = ChatType(d["chat_type"])
    d["sender"] = Sender(**_known(Sender, d["sender"]))
    d["attachments"] = tuple(
        Attachment(**_known(Attachment, {**a, "kind": AttachmentKind(a["kind"])})) for a in d.get("attachments", ())
    )
    return InboundMessage(**_known(InboundMessage, d))


def _known(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}
