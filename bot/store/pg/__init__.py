"""The store on PostgreSQL (asyncpg, a pool): the same ports and the same named migrations as
the SQLite store, for several instances of one bot (``storage.url: postgresql://...``).

Each port is a small module with its SQL and a mixin on ``PgBase`` (``inbound``, ``history``,
``answers``, ``pairing``, ``approvals``, ``media``, ``schedules``, ``models``, ``browse``); a new port is one more module and one more base of
``PostgresStore``, and its tables one more entry in ``schema.DIALECT``.
"""

from __future__ import annotations

from bot.store.answers import AnswerOps
from bot.store.approvals import ApprovalOps
from bot.store.inbound import InboundOps
from bot.store.media import MediaOps
from bot.store.models import ModelOps
from bot.store.pairing import PairingOps
from bot.store.pg.base import safe_url
from bot.store.pg.browse import PgBrowse
from bot.store.pg.history import PgHistory
from bot.store.pg.schedules import PgClaims
from bot.store.schedules import ScheduleOps


class PostgresStore(InboundOps, PgHistory, AnswerOps, PairingOps, ApprovalOps, MediaOps, PgClaims, ScheduleOps, ModelOps,
                    PgBrowse):
    """Every store port on one PostgreSQL database; ``async with PostgresStore(url) as store``."""


__all__ = ["PostgresStore", "safe_url"]
