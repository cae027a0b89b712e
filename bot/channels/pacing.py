"""One flush at a time, at most one every ``every`` seconds: how a live draft keeps pace.

A streamed answer arrives in many small pieces; a platform takes an edit (or an append)
only every second or so. A ``Pacer`` sits between the two: ``poke`` after new text flushes
at once when the interval has passed, else schedules one delayed flush; text that arrives
while a flush is pending or in flight is shown by it (the delayed flush goes round once
more), so there is never a second flush right after one. ``settle`` ends the pacing: a
delayed flush still waiting is cancelled, one whose request is in flight is awaited (a
request cut off half way could leave a message nobody knows the id of).

The flush returns whether it sent something; the interval counts from the start of the
last flush that did.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class Pacer:
    def __init__(self, flush: Callable[[], Awaitable[bool]], every: float, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._flush, self.every, self._clock = flush, every, clock
        self._last = float("-inf")
        self._later: asyncio.Task[None] | None = None
        self._again = False  # text came while the delayed flush was pending or sending
        self._sending = False  # the delayed flush's request is in flight
        self._settled = False

    def left(self) -> float:
        """Seconds until the next flush may go."""
        return max(0.0, self.every - (self._clock() - self._last))

    async def poke(self) -> None:
        """New text: flush now, or once the interval has passed."""
        if self._later is not None and not self._later.done():
            self._again = True
            return
        wait = self.left()
        if wait <= 0:
            await self.flush()
        else:
            self._later = asyncio.create_task(self._after(wait))

    async def flush(self) -> None:
        """Flush now; the interval counts from here when it sent something."""
        started = self._clock()
        if await self._flush():
            self._last = started

    async def _after(self, wait: float) -> None:
        while True:
            await asyncio.sleep(wait)
            self._again = False
            self._sending = True
            try:
                await self.flush()
            finally:
                self._sending = False
            if not self._again or self._settled:
                return
            wait = self.left()

    async def settle(self) -> None:
        """No more delayed flushes: the one waiting is cancelled, the one sending awaited."""
        self._settled = True
        later = self._later
        if later is None or later.done():
            return
        if not self._sending:
            later.cancel()
        await asyncio.wait({later})
