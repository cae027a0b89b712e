"""Pairing codes and approved senders (the ``PairingStore`` port), written once for both stores.

A request holds the engine's lock on its origin (PostgreSQL: a transaction's advisory lock;
SQLite's writers take turns anyway), so that instances handing out codes at the same moment
still never pass ``max_pending`` for one origin.
"""

from __future__ import annotations

import logging

from bot.errors import StoreError
from bot.pairing import new_code, normalize_code
from bot.store.base import ApprovedSender, PairingCode
from bot.store.engine import Engine
from bot.store.op import Driven, Op, count, execute, one, rows, value

log = logging.getLogger(__name__)

_CODE_COLUMNS = "code, platform, user_id, user_name, created_at, expires_at"
DROP_EXPIRED = "DELETE FROM pairing_codes WHERE approved_at IS NULL AND expires_at <= ?"
SENDER_CODE = (f"SELECT {_CODE_COLUMNS} FROM pairing_codes"
               " WHERE platform = ? AND user_id = ? AND approved_at IS NULL AND expires_at > ?")
COUNT_PENDING = "SELECT COUNT(*) FROM pairing_codes WHERE origin = ? AND approved_at IS NULL AND expires_at > ?"
INSERT_CODE = (f"INSERT INTO pairing_codes ({_CODE_COLUMNS}, origin) VALUES (?, ?, ?, ?, ?, ?, ?)"
               " ON CONFLICT (code) DO NOTHING")
PENDING = (f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE approved_at IS NULL AND expires_at > ?"
           " ORDER BY created_at, code")
USE_CODE = ("UPDATE pairing_codes SET approved_at = ? WHERE code = ? AND approved_at IS NULL AND expires_at > ?"
            f" RETURNING {_CODE_COLUMNS}")
APPROVE_SENDER = ("INSERT INTO approved_senders (platform, user_id, name, approved_at) VALUES (?, ?, ?, ?)"
                  " ON CONFLICT (platform, user_id) DO UPDATE SET name = excluded.name,"
                  " approved_at = excluded.approved_at")
DROP_CODE = (f"DELETE FROM pairing_codes WHERE code = ? AND approved_at IS NULL AND expires_at > ?"
             f" RETURNING {_CODE_COLUMNS}")
REVOKE = "DELETE FROM approved_senders WHERE platform = ? AND user_id = ?"
IS_APPROVED = "SELECT 1 FROM approved_senders WHERE platform = ? AND user_id = ?"
APPROVED_ALL = ("SELECT platform, user_id, name, approved_at FROM approved_senders"
                " ORDER BY approved_at, platform, user_id")
APPROVED_OF = ("SELECT platform, user_id, name, approved_at FROM approved_senders WHERE platform = ?"
               " ORDER BY approved_at, user_id")
CODE_ATTEMPTS = 8  # collisions among 32^8 codes: never, in practice


def request(d: Engine, platform: str, user_id: str, name: str, now: float, ttl: float, max_pending: int,
            origin: str) -> Op[PairingCode | None]:
    if d.xact_lock:
        yield from execute(d.xact_lock, f"pairing:{origin}")
    yield from execute(DROP_EXPIRED, now)  # housekeeping: spam never piles up
    found = yield from one(SENDER_CODE, platform, user_id, now)
    if found is not None:
        return PairingCode(*found)
    pending = yield from value(COUNT_PENDING, origin, now)
    if pending >= max_pending:  # a waiting code is never dropped: this sender tries again later
        log.info("pairing %s: %d requests pending from %s; none for %s until one expires or is approved",
                 platform, pending, origin, user_id)
        return None
    for _ in range(CODE_ATTEMPTS):
        code = PairingCode(new_code(), platform, user_id, name, now, now + ttl)
        if (yield from count(INSERT_CODE, code.code, code.platform, code.user_id, code.user_name, code.created_at,
                             code.expires_at, origin)) == 1:
            log.info("pairing %s:%s: new code (%d pending from %s)", platform, user_id, pending + 1, origin)
            return code
    raise StoreError(f"could not draw an unused pairing code in {CODE_ATTEMPTS} attempts")


def approve(code: str, now: float) -> Op[PairingCode | None]:
    found = yield from one(USE_CODE, now, code, now)
    if found is None:
        return None
    approved = PairingCode(*found)
    yield from execute(APPROVE_SENDER, approved.platform, approved.user_id, approved.user_name, now)
    return approved


class PairingOps(Driven):
    async def pairing_request(
        self, platform: str, user_id: str, name: str, *, now: float, ttl: float = 3600.0, max_pending: int = 3,
        origin: str | None = None,
    ) -> PairingCode | None:
        where = platform if origin is None else origin
        return await self._write(request(self.engine, platform, user_id, name, now, ttl, max_pending, where))

    async def pending_pairings(self, now: float) -> list[PairingCode]:
        return [PairingCode(*r) for r in await self._read(rows(PENDING, now))]

    async def approve_pairing(self, code: str, now: float) -> PairingCode | None:
        approved = await self._write(approve(normalize_code(code), now))
        if approved is None:
            log.info("pairing: approval of an unknown, expired or used code refused")
        else:
            log.info("pairing %s:%s: approved", approved.platform, approved.user_id)
        return approved

    async def deny_pairing(self, code: str, now: float) -> PairingCode | None:
        found = await self._write(one(DROP_CODE, normalize_code(code), now))
        if found is None:
            log.info("pairing: denial of an unknown, expired or used code refused")
            return None
        denied = PairingCode(*found)
        log.info("pairing %s:%s: denied", denied.platform, denied.user_id)
        return denied

    async def revoke_sender(self, platform: str, user_id: str) -> bool:
        if await self._write(count(REVOKE, platform, user_id)):
            log.info("pairing %s:%s: approval revoked", platform, user_id)
            return True
        return False

    async def is_approved(self, platform: str, user_id: str) -> bool:
        return await self._read(one(IS_APPROVED, platform, user_id)) is not None

    async def approved_senders(self, platform: str | None = None) -> list[ApprovedSender]:
        found = await self._read(rows(APPROVED_ALL) if platform is None else rows(APPROVED_OF, platform))
        return [ApprovedSender(*r) for r in found]
