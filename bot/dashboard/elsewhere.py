"""The runs of the other instances of a cluster (``bot.peers.Asks``), for the live board.

A page watching asks every other live instance to publish its board (``dashboard.board``):
each writes its rows, as JSON, into ``dashboard_boards`` (its own row, replaced) and answers;
the asker then reads the rows of those that answered. The rows go through the database, not
the NOTIFY (a NOTIFY carries at most 8,000 bytes: a busy instance's board would not fit). One
look serves every page watching for ``FRESH`` seconds, so a board costs each instance one
small write a second at most, and nothing while nobody watches.

A Stop of a run elsewhere is asked of the instance that runs it (``dashboard.stop``): it stops
the run there as the dashboard's Stop does here (``/stop``'s notice in its chat included).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields

from bot.dashboard.live import LiveBoard, LiveRun
from bot.dashboard.tables import boards, publish
from bot.peers import Asks, Note
from bot.store.schema_steps import StepStore

log = logging.getLogger(__name__)

FRESH = 1.0  # seconds one look at the other instances' boards serves every page
ASK_TIMEOUT = 1.5  # seconds the other instances have to publish their boards
STOP_TIMEOUT = 15.0  # seconds the instance running a run has to stop it (it waits for the run to end)
PUBLISH, STOP = "dashboard.board", "dashboard.stop"

_NAMES = frozenset(f.name for f in fields(LiveRun))


class Elsewhere:
    """The other instances' runs, and a Stop of one of them (``live.Elsewhere``)."""

    def __init__(self, peers: Asks, store: StepStore, board: LiveBoard, stop_run: Callable[[str], Awaitable[bool]], *,
                 clock: Callable[[], float] = time.time) -> None:
        self._peers = peers
        self._store = store
        self._board = board
        self._stop_run = stop_run
        self._clock = clock
        self.instance = peers.instance
        self._seen: list[LiveRun] = []
        self._seen_at = -FRESH
        self._looking = asyncio.Lock()

    def start(self) -> None:
        """Answer the other instances' boards and stops (every instance does, shown or not)."""
        self._peers.respond(PUBLISH, self._publish)
        self._peers.respond(STOP, self._stop)

    async def runs(self) -> list[LiveRun]:
        """The other live instances' runs in flight (those that answered within ``ASK_TIMEOUT``)."""
        async with self._looking:
            if time.monotonic() - self._seen_at < FRESH:
                return self._seen
            answered = tuple(sorted({str(a["from"]) for a in await self._peers.ask(PUBLISH, {}, timeout=ASK_TIMEOUT)
                                     if a.get("published")}))
            found: list[LiveRun] = []
            for instance, text in await self._store.read(boards(answered)):
                found.extend(_rows(instance, text))
            self._seen, self._seen_at = found, time.monotonic()
            return found

    async def stop_there(self, instance: str, run_id: str) -> bool | None:
        """Stop ``run_id`` on ``instance``: whether it was stopped; None when the instance did not answer."""
        answers = await self._peers.ask(STOP, {"run": run_id}, to=instance, timeout=STOP_TIMEOUT)
        if not answers:
            return None
        self._seen_at = -FRESH  # the next look asks again
        return bool(answers[0].get("stopped"))

    async def _publish(self, message: Note) -> Note:
        await self._store.write(publish(self.instance, self._board.payload(), self._clock()))
        return {"published": True}

    async def _stop(self, message: Note) -> Note:
        run_id = str(message.get("run", ""))[:200]
        stopped = await self._stop_run(run_id)
        log.info("dashboard: run %s stopped here for %s: %s", run_id, message.get("from"), stopped)
        return {"stopped": stopped}


def _rows(instance: str, text: str) -> list[LiveRun]:
    """An instance's published rows, as this version reads them (a field it does not know is left out)."""
    try:
        shown = json.loads(text)["runs"]
        return [LiveRun(**{**{k: v for k, v in row.items() if k in _NAMES}, "instance": instance}) for row in shown]
    except (ValueError, KeyError, TypeError):
        log.warning("dashboard: the board %s published cannot be read", instance)
        return []
