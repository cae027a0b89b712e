"""What every channel keeps from ``start`` to ``stop``, written once.

    self._life = Lifecycle()
    async def start(self, inbox):  self._life.open(); ...; self._life.spawn(self._poll(), "poller")
    async def stop(self):          await self._life.stop_tasks(); ...; self._life.close()
    async def wait_closed(self):   await self._life.wait()
    where it cannot go on:         self._life.fail(ChannelError("channels.x.token: refused"))

The end of a channel is one future: ``close`` ends it cleanly (stopped, or the terminal's
input ended), ``fail`` ends it with the error ``wait`` then raises (a refused token, a
second poller); the first ending wins, and a failure nobody waits for is not reported
again by asyncio. A ``Lifecycle`` is the ``bot.tasks.OwnedTasks`` of the tasks a channel starts,
and ``stop_tasks`` ends them, after an optional grace for those handing a message to the inbox.
"""

from __future__ import annotations

import asyncio

from bot.tasks import OwnedTasks


class Lifecycle(OwnedTasks):
    def __init__(self) -> None:
        super().__init__()
        self._closed: asyncio.Future[None] | None = None

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

    stop_tasks = OwnedTasks.stop  # ends the owned tasks (``stop`` would read as the channel's)
