"""Leases in rows: one holder per name until it stops renewing, with fencing tokens.

A lease is taken when it is free or expired (``expires_at`` on the database's clock), renewed
for all names at once by the holder's heartbeat, and given back on a clean stop. Each time a
lease changes hands it gets a new token from one sequence, so a token only grows: a holder that
finds a different token on renewal has lost the lease, and stops acting on it.
"""

from __future__ import annotations

from bot.store.pg.base import Db
from bot.store.pg.sql import NOW

_ACQUIRE = (
    "INSERT INTO cluster_leases (name, holder, token, expires_at)"
    f" VALUES ($1, $2, nextval('cluster_fence'), {NOW} + $3)"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,"
    " token = CASE WHEN cluster_leases.holder = excluded.holder THEN cluster_leases.token ELSE excluded.token END"
    f" WHERE cluster_leases.expires_at < {NOW} OR cluster_leases.holder = excluded.holder"
    " RETURNING token"
)
_RENEW = f"UPDATE cluster_leases SET expires_at = {NOW} + $2 WHERE holder = $1 RETURNING name, token"
_RELEASE = "DELETE FROM cluster_leases WHERE name = $1 AND holder = $2"
_RELEASE_ALL = "DELETE FROM cluster_leases WHERE holder = $1"
_HOLDER = f"SELECT holder FROM cluster_leases WHERE name = $1 AND expires_at >= {NOW}"


class LeaseRows:
    """The lease SQL for one instance (``holder``), on a pool or a connection."""

    def __init__(self, holder: str, seconds: float) -> None:
        self.holder = holder
        self.seconds = seconds

    async def acquire(self, db: Db, name: str) -> int | None:
        """The lease's token when this instance holds it now, else None."""
        token = await db.fetchval(_ACQUIRE, name, self.holder, self.seconds)
        return int(token) if token is not None else None

    async def renew(self, db: Db) -> dict[str, int]:
        """Renew everything this instance holds; name -> token of what it still holds."""
        return {r["name"]: int(r["token"]) for r in await db.fetch(_RENEW, self.holder, self.seconds)}

    async def release(self, db: Db, name: str) -> None:
        await db.execute(_RELEASE, name, self.holder)

    async def release_all(self, db: Db) -> None:
        await db.execute(_RELEASE_ALL, self.holder)

    async def holder_of(self, db: Db, name: str) -> str | None:
        holder = await db.fetchval(_HOLDER, name)
        return str(holder) if holder is not None else None
