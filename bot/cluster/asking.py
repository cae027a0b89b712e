"""A capability's questions between the instances of a cluster (``bot.peers.Asks``): an answer
registered by its kind, a question to one instance or to every live one, over the cluster's
bus. A part of ``Cluster`` (which sets these attributes)."""

from __future__ import annotations

import logging
from typing import Protocol

import asyncpg

from bot.cluster.bus import Bus, Message
from bot.peers import Note, Responder
from bot.store.pg.sql import NOW

log = logging.getLogger(__name__)

ALIVE_OTHERS = (f"SELECT count(*) FROM cluster_instances WHERE id <> $1 AND stopped_at IS NULL"
                f" AND seen_at >= {NOW} - $2")
OWN_KINDS = frozenset({"pull", "stop", "stopall", "decide", "answer", "giveback"})  # the cluster's own questions


class _Leasing(Protocol):
    @property
    def lease_seconds(self) -> float: ...


class Asking:
    instance: str
    settings: _Leasing
    _pool: asyncpg.Pool
    _bus: Bus
    _responders: dict[str, Responder]

    def respond(self, kind: str, answer: Responder) -> None:
        if kind in OWN_KINDS:
            raise ValueError(f"{kind!r} is a question of the cluster's own")
        self._responders[kind] = answer

    async def ask(self, kind: str, body: Note, *, to: str | None = None, timeout: float = 2.0) -> list[Note]:
        if to is None:
            others = await self._pool.fetchval(ALIVE_OTHERS, self.instance, self.settings.lease_seconds)
            if not others:
                return []
            return await self._bus.request(self._pool, None, {**body, "kind": kind}, answers=others, timeout=timeout)
        return await self._bus.request(self._pool, to, {**body, "kind": kind}, timeout=timeout)

    async def _respond(self, answer: Responder, message: Message) -> None:
        try:
            said = await answer(message)
        except Exception:  # the asker gets no answer from this instance (as from a dead one)
            log.exception("cluster: answering %s from %s failed", message.get("kind"), message.get("from"))
            return
        await self._bus.answer(self._pool, message, said)
