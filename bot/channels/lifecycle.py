"""What every channel keeps from ``start`` to ``stop``, written once.

    self._life = Lifecycle()
    async def start(self, inbox):  self._life.open(); ...; self._life.spawn(self._poll(), "poller")
    async def stop(self):          await self._life.stop_tasks(); ...; self._life.close()
    async def wait_closed(self):   await self._life.wait()
    where it cannot go on:         self._life.fail(ChannelError("channels.x.token: refused"))

The end of a channel is one future: ``close`` ends it cleanly (stopped, or the terminal's
input ended), ``fail`` ends it with the error ``wait`` then raises (a refused token, a
second poller); the first ending wins, and a failure nobody waits for is not reported
again by asyncio. The tasks a channel starts are owned here (``bot.tasks.OwnedTasks``), and
``stop_tasks`` ends them, after an optional grace for those
handing a message to the inbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from bot.tasks import OwnedTasks


class Lifecycle:
    def __init__(self) -> None:
        self._closed: asyncio.Future[None] | None = None
        self._tasks = OwnedTasks()

    def open(self) -> None:
        """At ``start``: a fresh end, not reached yet (on the running loop)."""
        self._closed = asyncio.get_running_loop().create_future()

    @property
    def ended(self) -> bool:
        return self._closed is not None and self._closed.done()

    @property
    def failure(self) -> BaseException | None:
        """The error that ended the channel; None while it lives or when it ended cleanly."""
        if self._closed is None or not self._closed.done():
            return None
        return self._closed.exception()

    def close(self) -> None:
        """The channel ended without a failure; nothing when it had ended already."""
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def fail(self, error: BaseException) -> None:
        """The channel cannot go on: ``wait`` raises ``error``; nothing when it had ended already."""
        if self._closed is not None and not self._closed.done():
            self._closed.set_exception(error)
            self._closed.exception()  # retrieved here: ``wait`` (or ``start``) reports it

    async def wait(self) -> None:
        """Until the channel ends; raises the failure that ended it."""
        assert self._closed is not None, "start() first"
        await asyncio.shield(self._closed)

    # -- owned tasks ----------------------------------------------------------------------

    @property
    def tasks(self) -> frozenset[asyncio.Future[Any]]:
        return self._tasks.tasks

    def spawn(self, work: Awaitable[Any], name: str | None = None) -> asyncio.Future[Any]:
        """Run ``work`` as a task the channel owns."""
        return self._tasks.spawn(work, name)

    def own(self, task: asyncio.Future[Any]) -> None:
        """Own a task someone else started (an SDK's event handler), so that ``stop_tasks`` waits for it."""
        self._tasks.own(task)

    async def stop_tasks(self, grace: float = 0.0) -> None:
        """End the owned tasks: those still running after ``grace`` seconds are cancelled."""
        await self._tasks.stop(grace)
