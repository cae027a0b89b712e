"""The inbound log's SQL that the cluster shares with the store (``bot.cluster.work``)."""

from __future__ import annotations

import asyncpg

from bot.store.base import InboundRecord
from bot.store.engine import POSTGRES
from bot.store.inbound import not_owed, record_from

NOT_OWED = not_owed(POSTGRES)  # of the inbound row ``i``


def record_of(row: asyncpg.Record) -> InboundRecord:
    """An ``inbound`` row (id, session_key, payload, received_at) as the message it stored."""
    return record_from(tuple(row))
