"""Messages between instances over LISTEN/NOTIFY: one channel per instance and one for all.

One task owns the listening connection from open to close (STYLE 22): it connects, LISTENs,
and when the connection is lost reconnects with the project's backoff; ``reconnected`` runs
after each new connection (missed notifications are made up for by a sweep of the store).
A message is a small JSON object with a ``kind``; ``request`` sends one with a fresh ``req``
id and waits for the answers that carry it back (``answer``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

import asyncpg

from bot.backoff import Backoff
from bot.store.pg.base import Db

log = logging.getLogger(__name__)

ALL = "chatgate_all"
BACKOFF = Backoff(base=0.5, factor=2.0, cap=10.0)
Message = dict[str, Any]
Handler = Callable[[Message], None]


def channel_of(instance: str) -> str:
    """The NOTIFY channel of one instance (an identifier of at most 63 bytes, whatever its name)."""
    return "chatgate_" + hashlib.sha1(instance.encode()).hexdigest()[:24]


class State(StrEnum):
    CONNECTING = "connecting"
    READY = "ready"
    DOWN = "down"


class Bus:
    def __init__(self, url: str, instance: str, handle: Handler, *,
                 reconnected: Callable[[], Awaitable[None]] | None = None) -> None:
        self._url = url
        self.instance = instance
        self._handle = handle
        self._reconnected = reconnected
        self.state = State.CONNECTING
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._waiting: dict[str, tuple[asyncio.Queue[Message], int]] = {}

    async def start(self, timeout: float = 10.0) -> None:
        self._task = asyncio.create_task(self._own(), name="cluster bus")
        await asyncio.wait_for(asyncio.shield(self._ready.wait()), timeout)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})

    async def send(self, db: Db, to: str | None, message: Message) -> None:
        """NOTIFY one instance (``to``), or every instance (None), this instance included."""
        await db.execute("SELECT pg_notify($1, $2)", channel_of(to) if to else ALL,
                         json.dumps({**message, "from": self.instance}, separators=(",", ":")))

    async def request(self, db: Db, to: str | None, message: Message, *, answers: int = 1,
                      timeout: float = 5.0) -> list[Message]:
        """Send and gather up to ``answers`` answers within ``timeout`` seconds (fewer when some
        never came: an instance that died meanwhile)."""
        req = uuid.uuid4().hex
        queue: asyncio.Queue[Message] = asyncio.Queue()
        self._waiting[req] = (queue, answers)
        got: list[Message] = []
        try:
            await self.send(db, to, {**message, "req": req})
            async with asyncio.timeout(timeout):
                while len(got) < answers:
                    got.append(await queue.get())
        except TimeoutError:
            log.warning("cluster: %d of %d answers to %s came within %.1f s", len(got), answers,
                        message.get("kind"), timeout)
        finally:
            del self._waiting[req]
        return got

    async def answer(self, db: Db, question: Message, message: Message) -> None:
        await self.send(db, question["from"], {**message, "kind": "answer", "req": question["req"]})

    # -- the listening connection ----------------------------------------------------

    async def _own(self) -> None:
        failures = 0
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self._url, timeout=10)
                lost = asyncio.Event()
                conn.add_termination_listener(lambda _, ended=lost: ended.set())
                for channel in (channel_of(self.instance), ALL):
                    await conn.add_listener(channel, self._notified)
                first = not self._ready.is_set()
                self.state = State.READY
                self._ready.set()
                failures = 0
                if not first and self._reconnected is not None:
                    await self._reconnected()
                await lost.wait()
                log.warning("cluster: the LISTEN connection was lost; reconnecting")
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                failures += 1
                self.state = State.DOWN
                wait = BACKOFF.delay(failures)
                log.warning("cluster: cannot LISTEN (%s); again in %.1f s", exc, wait)
                await asyncio.sleep(wait)
            finally:
                if conn is not None and not conn.is_closed():
                    await conn.close(timeout=2)

    def _notified(self, conn: Db, pid: int, channel: str, payload: object) -> None:
        try:
            message: Message = json.loads(str(payload))
        except ValueError:
            log.warning("cluster: a notification that is not JSON on %s", channel)
            return
        if message.get("kind") == "answer":
            waiting = self._waiting.get(message.get("req", ""))
            if waiting is not None:
                waiting[0].put_nowait(message)
            return
        self._handle(message)
