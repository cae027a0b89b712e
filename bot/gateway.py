"""Inbound message -> dedupe -> commands -> run -> reply, for every channel.

The gateway owns every run task: one active run per session (later messages of a busy
session wait their turn), all cancelled on shutdown. ``/stop`` cancels the session's run
and is answered at once; a cancellation from outside (shutdown) always propagates.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from adapters.base import ChannelAdapter
from bot.agent.events import EventBus, Mailbox, RunEvent
from bot.agent.loop import Agent, RunRequest, RunResult, RunStatus
from bot.commands import HELP, Command, parse_command
from bot.messages import InboundMessage, OutboundReply
from bot.session_keys import DmScope, key_for
from bot.store.base import Store

log = logging.getLogger(__name__)

SHOW_DRAIN_TIMEOUT = 2.0  # seconds the final answer waits for progress still being shown


@dataclass(slots=True)
class ActiveRun:
    run_id: str
    inbound: InboundMessage
    task: asyncio.Task[RunResult] | None = None
    stopped: bool = False  # cancelled by /stop, not by shutdown


@dataclass(slots=True)
class _Lane:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    active: ActiveRun | None = None
    users: int = 0  # runs holding or waiting for the lock; the lane goes when none is left


class Gateway:
    def __init__(
        self,
        agent: Agent,
        store: Store,
        events: EventBus,
        adapters: Mapping[str, ChannelAdapter],
        *,
        agent_id: str,
        dm_scope: DmScope = "per-user",
        identity_links: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._agent = agent
        self._store = store
        self._adapters = adapters
        self._agent_id = agent_id
        self._dm_scope = dm_scope
        self._identity_links = identity_links or {}
        self._lanes: dict[str, _Lane] = {}
        self._runs: dict[str, ActiveRun] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Progress goes to each adapter through its own mailbox: a slow platform never holds up a run.
        self._views = {name: Mailbox(adapter.show, f"show {name}") for name, adapter in adapters.items()}
        events.subscribe(self._route)

    def session_key(self, msg: InboundMessage) -> str:
        return str(key_for(msg, self._agent_id, dm_scope=self._dm_scope, identity_links=self._identity_links))

    def is_running(self, session_key: str) -> bool:
        lane = self._lanes.get(session_key)
        return lane is not None and lane.active is not None

    async def handle(self, msg: InboundMessage) -> None:
        """Take one inbound message. Returns quickly; the run goes on in a task we own."""
        key = self.session_key(msg)
        command = parse_command(msg.text)
        if command is not None and await self._command(command, msg, key):
            return
        inbound_id = await self._store.record_inbound(msg, key)
        if inbound_id is None:
            log.info("redelivered message ignored session=%s message=%s", key, msg.message_id)
            return
        task = asyncio.create_task(self._run(key, msg, inbound_id), name=f"run {key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self, session_key: str) -> bool:
        """Cancel the session's active run; True if there was one."""
        lane = self._lanes.get(session_key)
        active = lane.active if lane else None
        if active is None or active.task is None or active.task.done():
            return False
        active.stopped = True
        active.task.cancel()
        await asyncio.wait({active.task})
        return True

    async def aclose(self) -> None:
        """Cancel every run and wait for them to end."""
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for view in self._views.values():
            await view.aclose()

    async def _command(self, command: Command, msg: InboundMessage, key: str) -> bool:
        if command.name == "stop":
            stopped = await self.stop(key)
            await self._reply(msg, "Stopped." if stopped else "Nothing is running.", "stop")
        elif command.name in ("new", "reset"):
            await self.stop(key)
            await self._store.session(key, fresh=True)
            await self._reply(msg, "Started a fresh conversation.", "new")
        elif command.name in ("help", "start"):
            await self._reply(msg, HELP, "help")
        else:
            return False
        return True

    async def _run(self, key: str, msg: InboundMessage, inbound_id: int) -> None:
        lane = self._lanes.setdefault(key, _Lane())
        lane.users += 1
        try:
            async with lane.lock:
                session = await self._store.session(key)
                active = ActiveRun(uuid.uuid4().hex, msg)
                request = RunRequest(active.run_id, session, key, (msg,), (inbound_id,))
                active.task = asyncio.create_task(self._agent.run(request), name=f"agent {active.run_id}")
                lane.active = active
                self._runs[active.run_id] = active
                try:
                    result = await self._outcome(active)
                finally:
                    lane.active = None
                    self._runs.pop(active.run_id, None)
                await self._deliver(msg, result)
        finally:
            lane.users -= 1
            if lane.users == 0:
                del self._lanes[key]

    async def _outcome(self, active: ActiveRun) -> RunResult:
        """The run's result; /stop turns into a cancelled result, shutdown propagates."""
        assert active.task is not None
        try:
            return await asyncio.shield(active.task)
        except asyncio.CancelledError:
            if not active.stopped:  # shutdown: stop the agent too, then propagate
                active.task.cancel()
                await asyncio.wait({active.task})
                raise
            await asyncio.wait({active.task})
            return RunResult(active.run_id, RunStatus.CANCELLED)
        except Exception:
            log.exception("run crashed run=%s", active.run_id)
            return RunResult(active.run_id, RunStatus.FAILED, error="Something went wrong on my side; please try again.")

    async def _deliver(self, msg: InboundMessage, result: RunResult) -> None:
        await self._views[msg.platform].drain(SHOW_DRAIN_TIMEOUT)  # progress first, then the answer
        if result.status is RunStatus.COMPLETED and result.text:
            await self._reply(msg, result.text, result.run_id)
        elif result.status is RunStatus.FAILED and result.error:
            await self._reply(msg, result.error, result.run_id)

    async def _reply(self, msg: InboundMessage, text: str, run_id: str) -> None:
        adapter = self._adapters[msg.platform]
        reply = OutboundReply(msg.platform, msg.chat_id, text, run_id, 0, msg.thread_id, msg.message_id)
        try:
            await adapter.send(reply)
        except Exception:
            log.exception("sending reply failed platform=%s chat=%s run=%s", msg.platform, msg.chat_id, run_id)

    def _route(self, event: RunEvent) -> None:
        active = self._runs.get(event.run_id)
        if active is not None:
            self._views[active.inbound.platform].put(event, active.inbound)
