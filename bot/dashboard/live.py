"""The live board: the runs in flight, from the active-run registry and the run events.

The registry says which runs exist (a run stopped while it waited for a slot leaves no
event); the events say what each one does: when it started, whether it waits for a slot,
which tool it is in, whether it is retrying. ``on_event`` is an inline subscriber of the
bus, so it must be quick: it drops text chunks at once (most events of a run), updates one
dict entry for the others, and, only while a page is watching, arms one timer that wakes the
watchers ``interval`` seconds later. Many events in that time are one update: a page costs the bot one snapshot per
interval at most, however busy it is.

    board = LiveBoard(bot); board.start()
    async with board.watching():
        while True:
            await board.changed(timeout=1.0)
            send(board.payload())
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from typing import Protocol

from bot.agent.events import EventKind, Phase, RunEvent
from bot.dashboard.sources import Bot
from bot.messages import ChatType
from bot.runs import ActiveRun
from bot.session_keys import parse_key

INTERVAL = 0.1  # seconds: events within one interval are one update of the page
_ENDS = frozenset({EventKind.COMPLETED, EventKind.FAILED, EventKind.CANCELLED})
_QUIET = frozenset({EventKind.DELTA, EventKind.THINKING})


@dataclass(frozen=True, slots=True)
class LiveRun:
    """One row of the live page."""

    run_id: str
    session: str
    label: str  # the session in a few words (``session_label``)
    person: str  # who it answers: a name and platform:id, or "scheduled task"
    where: str  # DM | group CHAT
    model: str
    started_at: float  # time.time() when it started (or began to wait for a slot)
    state: str  # running | waiting | retrying
    tool: str  # the tool it is in, "" between tools
    queued: int  # messages of its session waiting behind it
    instance: str = ""  # the instance it runs on (several on PostgreSQL), "" alone


_FIELDS = tuple(f.name for f in fields(LiveRun))


@dataclass(slots=True)
class _Seen:
    started_at: float
    tool: str = ""
    retrying: bool = False
    waiting: bool = False  # for a slot (``runs.max_concurrent``, a group's cap)


@dataclass(frozen=True, slots=True)
class _Fixed:
    """What a run's row shows that never changes while it lives: worked out once."""

    label: str
    person: str
    where: str


class Elsewhere(Protocol):
    """The other instances of a cluster (``bot.dashboard.elsewhere``)."""

    @property
    def instance(self) -> str:
        """This instance's name."""
        ...

    async def runs(self) -> list[LiveRun]:
        """Their runs in flight."""
        ...

    async def stop_there(self, instance: str, run_id: str) -> bool | None:
        """Stop a run on ``instance`` as /stop does: whether it was stopped, None when it did not answer."""
        ...


class LiveBoard:
    def __init__(self, bot: Bot, *, interval: float = INTERVAL, clock: Callable[[], float] = time.time) -> None:
        self._bot = bot
        self.elsewhere: Elsewhere | None = None  # the other instances (set where there are some)
        self._interval = interval
        self._clock = clock
        self._seen: dict[str, _Seen] = {}
        self._fixed: dict[str, _Fixed] = {}
        self._watchers = 0
        self._timer: asyncio.TimerHandle | None = None
        self._wake: asyncio.Future[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.closed = False

    def start(self) -> None:
        self._unsubscribe = self._bot.events.subscribe(self.on_event)

    def close(self) -> None:
        """Stop listening and release every watcher (their feeds end)."""
        self.closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._publish()

    # -- the bus's inline subscriber -------------------------------------------------

    def on_event(self, event: RunEvent) -> None:
        kind = event.kind
        if kind in _QUIET:
            return
        if kind is EventKind.STARTED:
            self._seen[event.run_id] = _Seen(self._clock())
        elif event.phase is Phase.QUEUED:
            self._seen[event.run_id] = _Seen(self._clock(), waiting=True)
        elif kind in _ENDS:
            self._seen.pop(event.run_id, None)
        else:
            seen = self._seen.get(event.run_id)
            if seen is None:
                return
            if kind is EventKind.TOOL_CALL:
                seen.tool = event.tool.name if event.tool is not None else "a tool"
            elif kind is EventKind.TOOL_RESULT:
                seen.tool = ""
            elif kind is EventKind.RETRYING:
                seen.retrying = True
            elif event.phase is Phase.THINKING and (seen.retrying or seen.tool):
                seen.retrying, seen.tool = False, ""
            else:
                return
        if self._watchers and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._publish)

    def _publish(self) -> None:
        self._timer = None
        wake, self._wake = self._wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    # -- the watchers (the live feed of each open page) --------------------------------

    @asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        self._watchers += 1
        try:
            yield
        finally:
            self._watchers -= 1

    async def changed(self, timeout: float) -> bool:
        """Wait until the board changes (True) or ``timeout`` seconds pass (False)."""
        if self.closed:
            return False
        if self._wake is None:
            self._wake = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._wake), timeout)
        except TimeoutError:
            return False
        return True

    # -- what the page shows ----------------------------------------------------------

    def snapshot(self) -> list[LiveRun]:
        now, mono = self._clock(), time.monotonic()
        here = self.elsewhere.instance if self.elsewhere is not None else ""
        rows = []
        runs = tuple(self._bot.registry.runs())
        for run in runs:
            seen = self._seen.get(run.run_id)
            if seen is None:  # started before the board listened (or between two events): since it arrived
                started, state, tool = now - (mono - run.batch[-1].arrived), "running", ""
            else:
                state = "waiting" if seen.waiting else "retrying" if seen.retrying else "running"
                started, tool = seen.started_at, seen.tool
            fixed = self._fixed.get(run.run_id)
            if fixed is None:
                fixed = self._fixed[run.run_id] = _Fixed(session_label(run.session_key), *_who(run))
            rows.append(LiveRun(run.run_id, run.session_key, fixed.label, fixed.person, fixed.where,
                                self._bot.model, started, state, tool, self._bot.queued(run.session_key), here))
        if len(self._seen) > len(runs) or len(self._fixed) > len(runs):  # ended (some without an event)
            alive = {run.run_id for run in runs}
            for known in (self._seen, self._fixed):
                for run_id in [r for r in known if r not in alive]:
                    del known[run_id]
        rows.sort(key=lambda r: r.started_at)
        return rows

    async def everywhere(self) -> list[LiveRun]:
        """This instance's runs and the other instances' (when there are others), oldest first."""
        rows = self.snapshot()
        if self.elsewhere is not None:
            rows = sorted(rows + await self.elsewhere.runs(), key=lambda r: r.started_at)
        return rows

    def payload(self, rows: list[LiveRun] | None = None) -> str:
        """The feed's JSON: the rows and the server's time (the page counts elapsed time from it)."""
        rows = self.snapshot() if rows is None else rows
        shown = [{name: getattr(r, name) for name in _FIELDS} for r in rows]
        return json.dumps({"now": self._clock(), "runs": shown}, ensure_ascii=False, separators=(",", ":"))


def _who(run: ActiveRun) -> tuple[str, str]:
    last = run.batch[-1]
    msg = next((p.msg for p in reversed(run.batch) if p.msg is not None), None)
    conversation = last.conversation
    if msg is not None:
        name = msg.sender.name or msg.sender.username or ""
        account = f"{msg.platform}:{msg.sender.id}"
        person = f"{name} ({account})" if name and name != msg.sender.id else account
        where = "DM" if msg.chat_type is ChatType.DM else f"group {msg.chat_id}"
        return person, where
    if conversation is not None:
        where = "DM" if conversation.chat_type is ChatType.DM else f"group {conversation.chat_id}"
        return "a task (no message)", where
    return "—", "—"


def session_label(key: str) -> str:
    """``agent:main:telegram:dm:42`` -> ``telegram DM 42``; a key it cannot read, as it is."""
    try:
        k = parse_key(key)
    except ValueError:
        return key
    text = f"{k.platform or 'linked'} {'DM' if k.kind is ChatType.DM else 'group'} {k.peer}"
    if k.thread is not None:
        text += f" thread {k.thread}"
    if k.member is not None:
        text += f" member {k.member}"
    return text + "".join(f" sub {n}" for n in k.subs)
