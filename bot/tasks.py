"""Tasks a component owns (STYLE habit 8), written once.

Every component that starts work in the background (the intake, the turn runner, each
channel through its ``Lifecycle``) keeps its tasks in an ``OwnedTasks``: a set with a
discard callback, so nothing is lost to the garbage collector and ``stop`` can end them
all, after an optional grace for those finishing a hand-over. A task that fails is logged
once, with its name, when it ends (asyncio would otherwise report it only at exit, if ever).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection
from typing import Any

log = logging.getLogger(__name__)


class OwnedTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    @property
    def tasks(self) -> frozenset[asyncio.Future[Any]]:
        return frozenset(self._tasks)

    def spawn(self, work: Awaitable[Any], name: str | None = None) -> asyncio.Future[Any]:
        """Run ``work`` as an owned task."""
        task = asyncio.ensure_future(work)
        if name is not None and isinstance(task, asyncio.Task):
            task.set_name(name)
        self.own(task)
        return task

    def own(self, task: asyncio.Future[Any]) -> None:
        """Own a task someone else started (an SDK's event handler), so that ``stop`` waits for it."""
        if task not in self._tasks:
            self._tasks.add(task)
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            name = task.get_name() if isinstance(task, asyncio.Task) else "a task"
            log.error("%s failed", name, exc_info=exc)

    async def stop(self, grace: float = 0.0) -> None:
        """End every owned task: those still running after ``grace`` seconds are cancelled."""
        if grace > 0 and self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        await cancel_all(set(self._tasks))


async def cancel_all(tasks: Collection[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
