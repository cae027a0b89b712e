"""A per-person server's processes: one per person, in that person's workspace.

A process starts on the person's first call (``get``), and stops once it had no call for the
server's ``idle_timeout`` (``reap``, which the hub runs now and then): a process is in use from
the moment a call wants it (``Supervisor.using``), so one that is still starting is never
taken for idle. A person is a workspace: a DM's, or a linked person's shared one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.mcp.supervisor import Supervisor

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]


@dataclass(slots=True)
class _Process:
    supervisor: Supervisor
    task: asyncio.Task[None]


class People:
    def __init__(self, name: str, idle_timeout: float, make: Callable[[Path], Supervisor], spawn: Spawn) -> None:
        self.name = name
        self.idle_timeout = idle_timeout
        self._make = make  # the supervisor of one person's process, started in ``home``
        self._spawn = spawn
        self._running: dict[Path, _Process] = {}

    def get(self, home: Path) -> Supervisor:
        """The process of the person whose workspace is ``home``, started if it is not running."""
        process = self._running.get(home)
        if process is None or process.task.done():
            supervisor = self._make(home)
            task = self._spawn(supervisor.run(), f"mcp:{self.name}:{home.name}")
            process = self._running[home] = _Process(supervisor, task)
            log.info("mcp server %s: starting a process for %s", self.name, home.name)
        return process.supervisor

    def reap(self, now: float | None = None) -> int:
        """Stop the processes idle for ``idle_timeout``; how many."""
        now = time.monotonic() if now is None else now
        stopped = 0
        for home, process in list(self._running.items()):
            idle = now - process.supervisor.last_used
            if process.supervisor.in_flight == 0 and idle >= self.idle_timeout:
                del self._running[home]
                process.task.cancel()
                stopped += 1
                log.info("mcp server %s: stopped the process for %s after %.0f s idle", self.name, home.name, idle)
        return stopped

    @property
    def running(self) -> int:
        return len(self._running)

    def last_error(self) -> str | None:
        errors = [p.supervisor.last_error for p in self._running.values() if p.supervisor.last_error]
        return errors[-1] if errors else None

    def forget(self) -> None:
        self._running.clear()
