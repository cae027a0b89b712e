"""Leases in rows: one holder per name until it stops renewing, with fencing tokens.

A lease is taken when it is free or expired (``expires_at`` on the database's clock), renewed
for all names at once by the holder's heartbeat, and given back on a clean stop. Each time a
lease changes hands it gets a new token from one sequence, so a token only grows: a holder that
finds a different token on renewal has lost the lease, and stops acting on it.

A session's turn commits under its lane's lease (``bot.store.pg.history.Fence``): the commit
locks the lease's row ``FOR KEY SHARE``, which the holder's renewal does not wait for and a
take-over does (it sets the key, so it locks the row ``FOR UPDATE``): a take-over happens before
a commit, whose check then fails, or after it. It waits at most ``TAKE_WAIT_MS`` (then the lease
is not taken this time, and the next sweep tries again), so that a holder frozen in the middle
of a commit never holds up the heartbeat of the instance that would take its sessions over.
"""

from __future__ import annotations

import asyncpg

from bot.store.pg.base import Db
from bot.store.pg.sql import NOW

TAKE_WAIT_MS = 200  # the longest a take-over waits for a commit under way under the lease
_ACQUIRE = (
    f"WITH bounded AS (SELECT set_config('lock_timeout', '{TAKE_WAIT_MS}', true))"  # this statement only
    " INSERT INTO cluster_leases (name, holder, token, expires_at)"
    f" SELECT $1, $2, nextval('cluster_fence'), {NOW} + $3 FROM bounded"
    " ON CONFLICT (name) DO UPDATE SET name = excluded.name, holder = excluded.holder,"
    " expires_at = excluded.expires_at,"
    " token = CASE WHEN cluster_leases.holder = excluded.holder THEN cluster_leases.token ELSE excluded.token END"
    f" WHERE cluster_leases.expires_at < {NOW} OR cluster_leases.holder = excluded.holder"
    " RETURNING token"
)
# the same, and who holds it when this instance could not take it (one round trip for a message
# another instance must be told of); the holder as the statement began: read only when no token came
_ACQUIRE_OR_HOLDER = (
    f"WITH taken AS ({_ACQUIRE})"
    f" SELECT (SELECT token FROM taken), (SELECT holder FROM cluster_leases WHERE name = $1 AND expires_at >= {NOW})"
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
        """The lease's token when this instance holds it now, else None (also when a commit under
        the lease is under way for longer than ``TAKE_WAIT_MS``)."""
        try:
            token = await db.fetchval(_ACQUIRE, name, self.holder, self.seconds)
        except asyncpg.LockNotAvailableError:
            return None
        return int(token) if token is not None else None

    async def acquire_or_holder(self, db: Db, name: str) -> tuple[int | None, str | None]:
        """(the lease's token, None) when this instance holds it now, else (None, its holder), the
        holder None when it could not be told (it went free meanwhile, or a commit under the lease
        is under way for longer than ``TAKE_WAIT_MS``)."""
        try:
            found = await db.fetchrow(_ACQUIRE_OR_HOLDER, name, self.holder, self.seconds)
        except asyncpg.LockNotAvailableError:
            return None, None
        assert found is not None  # a SELECT of two scalars has a row
        token, holder = found
        return (int(token), None) if token is not None else (None, str(holder) if holder is not None else None)

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
