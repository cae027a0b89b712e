"""The inbound log on PostgreSQL: dedupe, group commit, what is still unanswered.

A burst of ``record_inbound`` calls made in the same moment (a poll's updates, many events at
once) is inserted by one statement (``unnest`` of the rows) in one transaction
(``bot.store.batch.GroupCommit``), and each caller is answered once it is committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from bot.messages import InboundMessage
from bot.store import answers as sql
from bot.store.base import InboundRecord, SessionOf, key_of
from bot.store.batch import GroupCommit
from bot.store.pg.base import Connection, PgBase
from bot.store.pg.sql import numbered
from bot.store.sqlite import FORGOTTEN_KEPT, inbound_from_json, inbound_to_json

log = logging.getLogger(__name__)

_INSERT_MANY = (
    "INSERT INTO inbound (platform, account, chat_id, message_id, session_key, payload, received_at)"
    " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[])"
    " ON CONFLICT (platform, account, chat_id, message_id) DO NOTHING"
    " RETURNING id, platform, account, chat_id, message_id"
)
MARK_ANSWERED = "UPDATE inbound SET answered_at = $1 WHERE id = ANY($2::bigint[]) AND answered_at IS NULL"
# unanswered and owed no stored answer (a JSON array contains a number that is one of its elements)
NOT_OWED = ("NOT EXISTS (SELECT 1 FROM answers a WHERE a.delivered_at IS NULL"
            " AND a.inbound_ids::jsonb @> to_jsonb(i.id))")
_UNANSWERED = ("SELECT id, session_key, payload, received_at FROM inbound i"
               f" WHERE answered_at IS NULL AND payload <> '' AND {NOT_OWED} ORDER BY id")
_PRUNE_FORGOTTEN = numbered(sql.PRUNE_FORGOTTEN)
_UPDATE_INBOUND = numbered(sql.UPDATE_INBOUND)
_FORGET_INBOUND = numbered(sql.FORGET_INBOUND)
_KEEP_AS_CONTEXT = numbered(sql.KEEP_AS_CONTEXT)
_PRUNE_CONTEXT = numbered(sql.PRUNE_CONTEXT)

Row = tuple[str, str, str, str, str, str, float]


class PgInbound(PgBase):
    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        super().__init__(url, pool_size=pool_size)
        self._arrivals: GroupCommit[Row] = GroupCommit(self._insert, self._own)

    async def record_inbound(self, msg: InboundMessage, of: SessionOf) -> int | None:
        row = (msg.platform, msg.account, msg.chat_id, msg.message_id, key_of(of), inbound_to_json(msg), time.time())
        inbound_id = await self._arrivals.add(row)
        if inbound_id is None:
            log.info("inbound %s:%s:%s is a redelivery", msg.platform, msg.chat_id, msg.message_id)
        return inbound_id

    async def _insert(self, rows: list[Row]) -> list[int | None]:
        """A burst's rows by one statement; each one's id, None for a redelivery (the first of two
        equal keys in one burst gets the id, the second is a redelivery)."""
        columns = [list(column) for column in zip(*rows, strict=True)]

        async def write(conn: Connection) -> list[Any]:
            return list(await conn.fetch(_INSERT_MANY, *columns))

        ids = {(r["platform"], r["account"], r["chat_id"], r["message_id"]): r["id"] for r in
               await self._transaction(write)}
        return [ids.pop(row[:4], None) for row in rows]

    async def update_inbound(self, inbound_id: int, msg: InboundMessage) -> None:
        await self._transact(lambda c: c.execute(_UPDATE_INBOUND, inbound_to_json(msg), inbound_id))

    async def forget_inbound(self, inbound_id: int) -> None:
        await self._transact(lambda c: c.execute(_FORGET_INBOUND, time.time(), inbound_id))

    async def keep_as_context(self, inbound_id: int) -> None:
        await self._transact(lambda c: c.execute(_KEEP_AS_CONTEXT, time.time(), inbound_id))

    async def prune_context(self, before: float) -> int:
        week_ago = time.time() - FORGOTTEN_KEPT

        async def write(conn: Connection) -> int:
            gone = _count(await conn.execute(_PRUNE_CONTEXT, before))
            return gone + _count(await conn.execute(_PRUNE_FORGOTTEN, week_ago))

        return await self._transact(write)

    async def mark_answered(self, inbound_ids: Iterable[int]) -> None:
        ids = list(inbound_ids)
        if ids:
            await self._transact(lambda c: c.execute(MARK_ANSWERED, time.time(), ids))

    async def unanswered(self) -> list[InboundRecord]:
        week_ago = time.time() - FORGOTTEN_KEPT
        await self._transact(lambda c: c.execute(_PRUNE_FORGOTTEN, week_ago))
        rows = await self.pool.fetch(_UNANSWERED)
        return [record_of(r) for r in rows]


def record_of(row: Any) -> InboundRecord:
    """An ``inbound`` row (id, session_key, payload, received_at) as the message it stored."""
    return InboundRecord(row["id"], row["session_key"], inbound_from_json(row["payload"]), row["received_at"])


def _count(status: str) -> int:
    """The row count of a command status such as ``DELETE 3``."""
    return int(status.rsplit(" ", 1)[-1])
