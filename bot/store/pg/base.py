"""The PostgreSQL driver of the store: the pool, its lifecycle, and running an operation
(``bot.store.op``) on a pooled connection, its ``?`` numbered (``drive``).

``_read`` runs it outside a transaction (or in a read-only snapshot); ``_write`` in one
transaction, shielded from its caller's cancellation as on SQLite (``Driven._shielded``).
``PostgresStore`` is this, the operations written once, and what only several instances need.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.errors import StoreError
from bot.store.engine import POSTGRES
from bot.store.op import Count, Driven, Fetch, Many, Op
from bot.store.pg import schema
from bot.store.pg.sql import numbered
from bot.store.schema_steps import Claimant

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = asyncpg.Connection | PoolConnectionProxy  # a connection of its own, or one lent by the pool
Db = asyncpg.Pool | Connection  # where a single statement may run
CONNECT_TIMEOUT = 10.0


def safe_url(url: str) -> str:
    """The URL without its password, for logs and errors."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PgBase(Driven):
    """The pool and its lifecycle; subclasses add the ports."""

    engine = POSTGRES
    claimant: Claimant | None = Claimant()  # alone on the database: work is claimed by no instance by name

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self._url = url
        self.where = safe_url(url)  # without its password
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._writes = set()
        self.migrated = 0  # migrations applied when it opened

    @property
    def pool(self) -> asyncpg.Pool:
        """The connection pool (the cluster shares it)."""
        if self._pool is None:
            raise StoreError(f"store is not open: {self.where}")
        return self._pool

    def claim_as(self, instance: str, lease_seconds: float) -> None:
        """Several instances share the database: work claimed in it names ``instance`` from now on, and
        what instances silent for ``lease_seconds`` claimed may be taken over (``claimant``)."""
        self.claimant = Claimant(instance, time.time(), lease_seconds)

    async def open(self) -> Self:
        """Connect and migrate; closes the pool again if either fails."""
        if self._pool is not None:
            return self
        try:
            pool = await asyncpg.create_pool(self._url, min_size=1, max_size=self._pool_size,
                                             timeout=CONNECT_TIMEOUT, command_timeout=60, reset=_keep_session)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            raise StoreError(f"cannot open the PostgreSQL database {self.where}: {exc}") from exc
        try:
            async with pool.acquire() as conn:
                applied = await schema.apply(conn, self.where)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, asyncpg.PostgresError):
                raise StoreError(f"cannot migrate the PostgreSQL database {self.where}: {exc}") from exc
            raise
        self._pool, self.migrated = pool, applied
        log.info("store %s open (schema %d, %d migrations applied now)", self.where, len(schema.names()), applied)
        return self

    async def close(self) -> None:
        """Close once the writes already started are done; safe to call twice."""
        if self._writes:
            await asyncio.wait(set(self._writes))
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
            log.info("store %s closed", self.where)

    async def _read(self, operation: Op[T], *, snapshot: bool = False) -> T:
        """``operation`` on a pooled connection, each statement on its own; ``snapshot``: in one
        read-only REPEATABLE READ transaction, so that its statements see the same moment."""
        async with self.pool.acquire() as conn:
            if not snapshot:
                return await drive(conn, operation)
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                return await drive(conn, operation)

    async def _write(self, operation: Op[T], *, alone: bool = False) -> T:
        """``operation`` in one transaction, shielded (``_shielded``); ``alone``: one statement, its own
        transaction (no BEGIN and COMMIT round trips)."""
        return await self._shielded(self._written(operation, alone))

    async def _written(self, operation: Op[T], alone: bool) -> T:
        async with self.pool.acquire() as conn:
            if alone:
                return await drive(conn, _one_statement(operation))
            async with conn.transaction():
                return await drive(conn, operation)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset of a connection given back: nothing more than what asyncpg always does
    before it (roll back a transaction left open, drop the listeners added through it). No code
    on the pool changes the session: no SET (only asyncpg's own jit toggle, which it restores),
    no LISTEN (the cluster's bus has a connection of its own), no cursor outside a transaction,
    advisory locks only ``pg_advisory_xact_lock``. So asyncpg's default reset query
    (``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``) would only cost one more
    round trip, and one more transaction on the server, per borrow: about 13 per message."""


async def drive(conn: Connection, operation: Op[T]) -> T:
    """Run ``operation`` on ``conn``: each request it yields is executed there (its ``?``
    numbered) and its result sent back."""
    result: Any = None
    try:
        while True:
            request = operation.send(result)
            if type(request) is Fetch:
                result = [tuple(r) for r in await conn.fetch(numbered(request.sql), *request.args)]
            elif type(request) is Count:
                result = changed(await conn.execute(numbered(request.sql), *request.args))
            else:
                assert type(request) is Many
                await conn.executemany(numbered(request.sql), request.rows)
                result = None
    except StopIteration as done:
        return done.value


def _one_statement(operation: Op[T]) -> Op[T]:
    """``operation``, which must yield one statement at most (``_write(alone=True)``)."""
    try:
        request = next(operation)
    except StopIteration as nothing:
        return nothing.value
    result = yield request
    try:
        operation.send(result)
    except StopIteration as done:
        return done.value
    raise StoreError(f"an operation written as one statement sent a second one after {request.sql[:60]!r}")


def changed(status: str) -> int:
    """The row count of a command status such as ``UPDATE 1`` or ``INSERT 0 3`` (0 for ``SAVEPOINT``)."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0
