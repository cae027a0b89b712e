"""Inbound message -> dedupe -> access -> commands -> dispatcher -> reply, for every channel.

Every inbound message is logged in the store before anything else; a redelivery (same
platform message id) stops there. Commands are answered at once, even during a run.
Everything else goes to the dispatcher (``bot.runs``), which runs one batch per session
at a time; the gateway runs the agent for it and delivers the answer exactly once per
part (the outbound ledger), retrying a failed send. On start-up, messages that were
stored but never answered (the process died) are run again, or, when too old, their
senders are told.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapters.base import ChannelAdapter
from bot.access import Access, Action, GroupContext
from bot.agent.events import EventBus, EventKind, Mailbox, RunEvent
from bot.agent.history import build_history, estimate_tokens
from bot.agent.loop import Agent, RunRequest, RunResult, RunStatus
from bot.commands import HELP, Command, parse_command, status_text
from bot.messages import ChatType, InboundMessage, OutboundReply
from bot.runs import ActiveRun, Admission, Dispatcher, Pending, RunLimits
from bot.session_keys import DmScope, key_for
from bot.store.base import OutboundLedger, Store

log = logging.getLogger(__name__)

SHOW_DRAIN_TIMEOUT = 2.0  # seconds the final answer waits for progress still being shown
SEND_ATTEMPTS = 3
BUSY = "I'm still busy, your message was not queued. Send it again when I've answered, or /stop."


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    agent_id: str
    dm_scope: DmScope = "per-user"
    identity_links: Mapping[str, Sequence[str]] | None = None
    limits: RunLimits = RunLimits()
    recover_max_age: float = 600.0


class Gateway:
    def __init__(self, agent: Agent, store: Store, ledger: OutboundLedger, events: EventBus,
                 adapters: Mapping[str, ChannelAdapter], access: Access, settings: GatewaySettings) -> None:
        self._agent = agent
        self._store = store
        self._ledger = ledger
        self._events = events
        self._adapters = adapters
        self._access = access
        self._settings = settings
        self._context = GroupContext()
        self.dispatcher = Dispatcher(self._execute, settings.limits, on_queued=self._queued,
                                     on_discard=self._discarded)
        # Progress goes to each adapter through its own mailbox: a slow platform never holds up a run.
        self._views = {name: Mailbox(adapter.show, f"show {name}") for name, adapter in adapters.items()}
        self._tasks: set[asyncio.Task[None]] = set()
        events.subscribe(self._route)

    def session_key(self, msg: InboundMessage) -> str:
        s = self._settings
        return str(key_for(msg, s.agent_id, dm_scope=s.dm_scope, identity_links=s.identity_links))

    async def handle(self, msg: InboundMessage) -> None:
        """Take one inbound message; returns once it is stored and dispatched."""
        key = self.session_key(msg)
        inbound_id = await self._store.record_inbound(msg, key)
        if inbound_id is None:
            log.info("redelivered message ignored session=%s message=%s", key, msg.message_id)
            return
        decision = await self._access.check(msg)
        if decision.action is not Action.RUN:
            if decision.action is Action.CONTEXT:
                self._context.remember(msg)
            elif decision.reply:
                await self._send(msg, decision.reply, f"access-{inbound_id}")
            log.debug("not run (%s: %s) session=%s", decision.action, decision.reason, key)
            await self._store.mark_answered((inbound_id,))
            return
        command = parse_command(msg.text)
        if command is not None:
            await self._command(command, msg, key, inbound_id)
            await self._store.mark_answered((inbound_id,))
            return
        self._submit(key, Pending(msg, inbound_id))

    async def recover(self) -> None:
        """Answer what a previous process stored but never answered."""
        now = time.time()
        for record in await self._store.unanswered():
            if now - record.received_at > self._settings.recover_max_age:
                preview = " ".join(record.message.text.split())[:60]
                await self._send(record.message, "Sorry, I was restarted before I could answer your message"
                                   f" (“{preview}”). Please send it again.", f"recover-{record.id}")
                await self._store.mark_answered((record.id,))
            else:
                log.info("recovering unanswered message session=%s inbound=%s", record.session_key, record.id)
                self._submit(record.session_key, Pending(record.message, record.id))

    async def aclose(self) -> None:
        """Cancel every run and wait for them to end."""
        await self.dispatcher.aclose()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        for view in self._views.values():
            await view.aclose()

    # -- dispatching -------------------------------------------------------------------

    def _submit(self, key: str, pending: Pending) -> None:
        if self.dispatcher.submit(key, pending) is Admission.REJECTED:
            log.warning("queue full session=%s; message %s not queued", key, pending.msg.message_id)
            self._spawn(self._refuse_busy(pending))

    async def _refuse_busy(self, pending: Pending) -> None:
        await self._send(pending.msg, BUSY, f"busy-{pending.inbound_id}")
        await self._store.mark_answered((pending.inbound_id,))

    async def _execute(self, run: ActiveRun) -> None:
        """Run one batch and deliver its answer (the dispatcher owns this task)."""
        last = run.batch[-1].msg
        session = await self._store.session(run.session_key)
        context = self._context.take(last) if last.chat_type is ChatType.GROUP else ()
        request = RunRequest(run.run_id, session, run.session_key, tuple(p.msg for p in run.batch),
                             tuple(p.inbound_id for p in run.batch), context=context)
        result = await self._agent.run(request)
        if run.stopped or run.generation != self.dispatcher.generation(run.session_key):
            log.info("late result of a stopped run discarded session=%s run=%s", run.session_key, run.run_id)
            return
        await self._deliver(last, result)

    async def _queued(self, run: ActiveRun) -> None:
        await self._events.emit(RunEvent(EventKind.ACTIVITY, run.run_id, run.session_key, "queued"))

    async def _discarded(self, batch: tuple[Pending, ...]) -> None:
        await self._store.mark_answered(p.inbound_id for p in batch)

    # -- commands ----------------------------------------------------------------------

    async def _command(self, command: Command, msg: InboundMessage, key: str, inbound_id: int) -> None:
        ref = f"cmd-{inbound_id}"
        if command.name == "stop":
            stopped, dropped = await self.dispatcher.stop(key)
            text = "Stopped." if stopped else "Nothing is running."
            if dropped:
                text += f" {dropped} waiting message{'s' if dropped != 1 else ''} dropped."
            await self._send(msg, text, ref)
        elif command.name == "stopall":
            if not self._access.is_owner(msg):
                if msg.chat_type is ChatType.DM:
                    await self._send(msg, "Only an owner can use /stopall.", ref)
                return
            count = await self.dispatcher.stop_chat(msg.platform, msg.chat_id)
            await self._send(msg, f"Stopped {count} run{'s' if count != 1 else ''}.", ref)
        elif command.name in ("new", "reset"):
            await self.dispatcher.stop(key)
            await self._store.session(key, fresh=True)
            await self._send(msg, "Started a fresh conversation. The old one is kept.", ref)
        elif command.name == "status":
            await self._send(msg, await self._status(key), ref)
        elif command.name == "whoami":
            where = "this DM" if msg.chat_type is ChatType.DM else f"chat {msg.chat_id}"
            await self._send(msg, f"Your {msg.platform} id is {msg.sender.id} ({where}).", ref)
        else:  # help, start
            await self._send(msg, HELP, ref)

    async def _status(self, key: str) -> str:
        s = self._agent.settings
        session = await self._store.session(key)
        history = build_history(await self._store.history(session, limit=400), max_turns=s.history_turns,
                                context_window=s.context_window)
        usage = await self._store.usage(session)
        return status_text(model=s.model, context_tokens=estimate_tokens(history), context_window=s.context_window,
                           input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost,
                           turns=usage.turns, running=self.dispatcher.active(key) is not None,
                           queued=self.dispatcher.queued(key))

    # -- delivery ----------------------------------------------------------------------

    async def _deliver(self, msg: InboundMessage, result: RunResult) -> None:
        await self._views[msg.platform].drain(SHOW_DRAIN_TIMEOUT)  # progress first, then the answer
        if result.status is RunStatus.COMPLETED and result.text:
            await self._send(msg, result.text, result.run_id)
        elif result.status is RunStatus.FAILED and result.error:
            await self._send(msg, result.error, result.run_id)

    async def _send(self, msg: InboundMessage, text: str, run_id: str, part: int = 0) -> None:
        """Send one part exactly once: skipped if the ledger has it, retried if a send fails."""
        if await self._ledger.outbound_sent(run_id, part):
            return
        adapter = self._adapters[msg.platform]
        reply = OutboundReply(msg.platform, msg.chat_id, text, run_id, part, msg.thread_id, msg.message_id)
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                message_id = await adapter.send(reply)
            except Exception:
                log.warning("send failed (attempt %d of %d) platform=%s chat=%s run=%s", attempt, SEND_ATTEMPTS,
                            msg.platform, msg.chat_id, run_id, exc_info=attempt == SEND_ATTEMPTS)
                if attempt < SEND_ATTEMPTS:
                    await asyncio.sleep(0.5 * attempt)
                continue
            await self._ledger.record_outbound(run_id, part, msg.platform, msg.chat_id, message_id)
            return

    # -- plumbing ----------------------------------------------------------------------

    def _route(self, event: RunEvent) -> None:
        run = self.dispatcher.registry.get(event.run_id)
        if run is not None:
            msg = run.batch[-1].msg
            self._views[msg.platform].put(event, msg)

    def _spawn(self, coro) -> None:  # type: ignore[no-untyped-def]
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
