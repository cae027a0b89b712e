"""Pairing codes and approved senders (the PairingStore port) on PostgreSQL.

A request takes a transaction-scoped advisory lock on its origin, so that instances handing
out codes at the same moment still never pass ``max_pending`` for one origin.
"""

from __future__ import annotations

import logging

from bot.errors import StoreError
from bot.pairing import new_code, normalize_code
from bot.store.base import ApprovedSender, PairingCode
from bot.store.pg.base import Connection, PgBase

log = logging.getLogger(__name__)

_CODE_COLUMNS = "code, platform, user_id, user_name, created_at, expires_at"
_LOCK_ORIGIN = "SELECT pg_advisory_xact_lock(hashtext('pairing:' || $1))"
_DROP_EXPIRED = "DELETE FROM pairing_codes WHERE approved_at IS NULL AND expires_at <= $1"
_SENDER_CODE = (f"SELECT {_CODE_COLUMNS} FROM pairing_codes"
                " WHERE platform = $1 AND user_id = $2 AND approved_at IS NULL AND expires_at > $3")
_COUNT_PENDING = "SELECT count(*) FROM pairing_codes WHERE origin = $1 AND approved_at IS NULL AND expires_at > $2"
_INSERT_CODE = (f"INSERT INTO pairing_codes ({_CODE_COLUMNS}, origin) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                " ON CONFLICT (code) DO NOTHING RETURNING code")
_PENDING = (f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE approved_at IS NULL AND expires_at > $1"
            " ORDER BY created_at, code")
_USE_CODE = ("UPDATE pairing_codes SET approved_at = $1 WHERE code = $2 AND approved_at IS NULL AND expires_at > $1"
             f" RETURNING {_CODE_COLUMNS}")
_APPROVE_SENDER = ("INSERT INTO approved_senders (platform, user_id, name, approved_at) VALUES ($1, $2, $3, $4)"
                   " ON CONFLICT (platform, user_id) DO UPDATE SET name = excluded.name,"
                   " approved_at = excluded.approved_at")
_DROP_CODE = (f"DELETE FROM pairing_codes WHERE code = $1 AND approved_at IS NULL AND expires_at > $2"
              f" RETURNING {_CODE_COLUMNS}")
_REVOKE = "DELETE FROM approved_senders WHERE platform = $1 AND user_id = $2"
_IS_APPROVED = "SELECT 1 FROM approved_senders WHERE platform = $1 AND user_id = $2"
_APPROVED_ALL = "SELECT platform, user_id, name, approved_at FROM approved_senders ORDER BY approved_at, platform, user_id"
_APPROVED_OF = ("SELECT platform, user_id, name, approved_at FROM approved_senders WHERE platform = $1"
                " ORDER BY approved_at, user_id")
_CODE_ATTEMPTS = 8


class PgPairing(PgBase):
    async def pairing_request(
        self, platform: str, user_id: str, name: str, *, now: float, ttl: float = 3600.0, max_pending: int = 3,
        origin: str | None = None,
    ) -> PairingCode | None:
        where = platform if origin is None else origin

        async def request(conn: Connection) -> PairingCode | None:
            await conn.execute(_LOCK_ORIGIN, where)
            await conn.execute(_DROP_EXPIRED, now)
            row = await conn.fetchrow(_SENDER_CODE, platform, user_id, now)
            if row is not None:
                return PairingCode(*row)
            pending = await conn.fetchval(_COUNT_PENDING, where, now)
            if pending >= max_pending:
                log.info("pairing %s: %d requests pending from %s; none for %s until one expires or is approved",
                         platform, pending, where, user_id)
                return None
            for _ in range(_CODE_ATTEMPTS):
                code = PairingCode(new_code(), platform, user_id, name, now, now + ttl)
                if await conn.fetchval(_INSERT_CODE, code.code, code.platform, code.user_id, code.user_name,
                                       code.created_at, code.expires_at, where) is not None:
                    log.info("pairing %s:%s: new code (%d pending from %s)", platform, user_id, pending + 1, where)
                    return code
            raise StoreError(f"could not draw an unused pairing code in {_CODE_ATTEMPTS} attempts")

        return await self._transact(request)

    async def pending_pairings(self, now: float) -> list[PairingCode]:
        return [PairingCode(*row) for row in await self.pool.fetch(_PENDING, now)]

    async def approve_pairing(self, code: str, now: float) -> PairingCode | None:
        wanted = normalize_code(code)

        async def approve(conn: Connection) -> PairingCode | None:
            row = await conn.fetchrow(_USE_CODE, now, wanted)
            if row is None:
                return None
            found = PairingCode(*row)
            await conn.execute(_APPROVE_SENDER, found.platform, found.user_id, found.user_name, now)
            return found

        approved = await self._transact(approve)
        if approved is None:
            log.info("pairing: approval of an unknown, expired or used code refused")
        else:
            log.info("pairing %s:%s: approved", approved.platform, approved.user_id)
        return approved

    async def deny_pairing(self, code: str, now: float) -> PairingCode | None:
        wanted = normalize_code(code)
        row = await self._transact(lambda c: c.fetchrow(_DROP_CODE, wanted, now))
        if row is None:
            log.info("pairing: denial of an unknown, expired or used code refused")
            return None
        denied = PairingCode(*row)
        log.info("pairing %s:%s: denied", denied.platform, denied.user_id)
        return denied

    async def revoke_sender(self, platform: str, user_id: str) -> bool:
        status = await self._transact(lambda c: c.execute(_REVOKE, platform, user_id))
        if status != "DELETE 0":
            log.info("pairing %s:%s: approval revoked", platform, user_id)
            return True
        return False

    async def is_approved(self, platform: str, user_id: str) -> bool:
        return await self.pool.fetchval(_IS_APPROVED, platform, user_id) is not None

    async def approved_senders(self, platform: str | None = None) -> list[ApprovedSender]:
        rows = await (self.pool.fetch(_APPROVED_ALL) if platform is None else self.pool.fetch(_APPROVED_OF, platform))
        return [ApprovedSender(*row) for row in rows]
