"""The store on PostgreSQL (asyncpg, a pool): the same ports, written once
(``bot.store.operations``), and the same named migrations, for several instances of one bot
(``storage.url: postgresql://...``).

``base`` is the driver (the pool, a read, a write in one transaction, ``schema`` the
migrations); what only several instances need, with no SQLite twin, is here too: a turn's
commit fenced by its lane's lease (``history``), the instance that claims work (``claim_as``,
which a capability's claims read as ``claimant``), and the SQL the cluster shares (``sql``;
``bot.cluster.work`` builds its reads of answers and the inbound log on the core's statements).
"""

from __future__ import annotations

from bot.store.operations import Operations
from bot.store.pg.base import PgBase, safe_url
from bot.store.pg.history import PgFencing


class PostgresStore(PgFencing, PgBase, Operations):
    """Every store port on one PostgreSQL database; ``async with PostgresStore(url) as store``."""


__all__ = ["PostgresStore", "safe_url"]
