"""Leases for channels: what one instance of several must do alone (poll Telegram, run a
Discord shard) is done while it holds a named lease.

    async with leases.hold("telegram:poller:123") as held:   # waits until this instance holds it
        ...  # poll; ``await held.lost()`` returns if another instance took it over

A channel that needs one is a ``UsesLeases``: the composition root hands it the cluster's
leases before ``start``. ``SOLE`` is the one-process kind (SQLite): held at once, never lost.
``while_held`` runs a task for as long as its lease is held.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable


class Held(Protocol):
    async def lost(self) -> None:
        """Return when the lease is lost (another instance holds it now); never, while it is held."""


class Leases(Protocol):
    def hold(self, name: str) -> AbstractAsyncContextManager[Held]:
        """Wait until this instance holds ``name``; given back when the block ends."""


@runtime_checkable
class UsesLeases(Protocol):
    def use_leases(self, leases: Leases) -> None:
        """Hold what must run on one instance only through ``leases`` (called before ``start``)."""


async def while_held(leases: Leases, name: str, work: Callable[[], Awaitable[None]]) -> bool:
    """Run ``work()`` while this instance holds ``name``: True when the lease was lost (``work``
    was cancelled; hold it again to go on), False when ``work`` ended on its own (its error raised)."""
    async with leases.hold(name) as held:
        running = asyncio.ensure_future(work())
        lost = asyncio.ensure_future(held.lost())
        try:
            await asyncio.wait({running, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (running, lost):
                task.cancel()
            await asyncio.wait({running, lost})
        if lost.done() and not lost.cancelled():
            return True
        if not running.cancelled() and (exc := running.exception()) is not None:
            raise exc
        return False


class SoleLeases:
    """One process: every lease is held at once and never lost (it is its own ``Held``)."""

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[Held]:
        yield self

    async def lost(self) -> None:
        await asyncio.Event().wait()


SOLE = SoleLeases()
