"""Inbound message -> stored -> access -> commands -> files -> dispatcher -> answer -> delivery.

``handle`` is every channel's ``Inbox``: it stores the message (deduped by platform,
account, chat and message id) and returns, so the channel may confirm the event; what
follows runs in a task the gateway owns, bounded by a semaphore. Access is decided from
metadata alone: an ignored or refused message keeps only its dedupe key, and a chat the
policy ignores gets nothing. Commands are answered at once, even during a run. A message
that will run has its files fetched through its channel (size-capped) into the
workspace's inbox, and the stored message records their paths, before the dispatcher
(``bot.runs``) runs it.

A run's progress is one ``Progress`` per run; its answer is rendered for the channel and
stored with the turn, then handed to delivery (``bot.delivery``), outside the run's slot.
Every way a run can end answers its messages: a silent run at once, an answer or a
failure sentence once delivered, ``/stop`` with "Stopped."; only a shutdown leaves them
unanswered, for ``recover`` to decide again after the restart, as if they had just come.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.access import Access, Action, GroupContext
from bot.agent.compaction import compact_reply
from bot.agent.events import EventBus, EventKind, RunEvent
from bot.agent.loop import FAILED, Agent, RunRequest, RunResult, RunStatus
from bot.channels import Channel, SendFailed, Status
from bot.commands import HELP, Command, parse_command, status_text
from bot.delivery import Delivery
from bot.limits import PersonLimits, budget_line, limit_keys
from bot.messages import Answer, ChatType, InboundMessage, Target
from bot.outbound.answer import answer_for
from bot.outbound.progress import Progress
from bot.runs import ActiveRun, Admission, Dispatcher, Pending, RunLimits
from bot.session_keys import DmScope, GroupScope, key_for
from bot.store.base import AnswerStore, Store
from bot.tools.policy import ToolPolicy
from bot.workspace import OutsideWorkspaceError, save_upload

log = logging.getLogger(__name__)

BUSY = "I'm still busy, your message was not queued. Send it again when I've answered, or /stop."
UNSAVED = ("Sorry, I could not save your file: inbox/ in your workspace is a link that leads outside it. "
           "Remove that link and send the file again.")
MAX_INBOUND = 64  # inbound messages decided (and their files fetched) at once
PRUNE_EVERY = 3600.0  # seconds between two prunings of stored group context
MAX_DOWNLOADS = 4  # files fetched at once
URGENT = ("stop", "stopall")  # commands that never wait for the session's earlier messages


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    agent_id: str
    dm_scope: DmScope = "per-user"
    identity_links: Mapping[str, Sequence[str]] | None = None
    limits: RunLimits = RunLimits()
    recover_max_age: float = 600.0
    max_download: Mapping[str, int] | None = None  # platform -> bytes
    tool_policy: Callable[[InboundMessage, bool], ToolPolicy] | None = None  # (message, sender is owner)
    group_scope: GroupScope = "per-group"  # per-user: a session per member in groups
    context_retention: float = 7 * 86400.0  # seconds a group message kept only as context stays stored


class GatewayStore(Store, AnswerStore):
    """The store the gateway needs: sessions and turns, and what is owed to chats."""


class Gateway:
    def __init__(self, agent: Agent, store: GatewayStore, events: EventBus, channels: Mapping[str, Channel],
                 access: Access, delivery: Delivery, settings: GatewaySettings,
                 limits: PersonLimits | None = None) -> None:
        self._agent = agent
        self._store = store
        self._events = events
        self._channels = channels
        self._access = access
        self._delivery = delivery
        self._settings = settings
        self._limits = limits if limits is not None and limits.active else None
        self._context = GroupContext()
        self.dispatcher = Dispatcher(self._execute, settings.limits, on_queued=self._queued,
                                     on_discard=self._discarded)
        self._progress: dict[str, Progress] = {}
        self._extra: dict[str, int] = {}  # run id -> extra messages sent (the message tool)
        self._lanes: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # per session: decided in arrival order
        self._inbound = asyncio.Semaphore(MAX_INBOUND)
        self._downloads = asyncio.Semaphore(MAX_DOWNLOADS)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._compacting: dict[str, asyncio.Task[Any]] = {}  # session key -> its post-run compaction
        self._early: set[int] | None = set()  # inbound ids the channels handed over before recover() looked
        events.subscribe(self._route)

    def session_key(self, msg: InboundMessage) -> str:
        s = self._settings
        return str(key_for(msg, s.agent_id, dm_scope=s.dm_scope, identity_links=s.identity_links,
                           group_scope=s.group_scope))

    async def handle(self, msg: InboundMessage) -> None:
        """The channels' inbox: returns once ``msg`` is stored (raises if it could not be)."""
        key = self.session_key(msg)
        inbound_id = await self._store.record_inbound(msg, key)
        if inbound_id is None:
            log.info("redelivered message ignored session=%s message=%s", key, msg.message_id)
            return
        if self._early is not None:
            self._early.add(inbound_id)
        self._spawn(self._process(msg, key, inbound_id, time.time()), f"inbound {inbound_id}")

    async def recover(self) -> None:
        """Start-up: first deliver what is owed, then decide again what was never answered;
        from then on, prune stored group context past its retention every hour."""
        self._spawn(self._prune_context(), "context pruning")
        await self._delivery.resume()
        unanswered = await self._store.unanswered()
        early, self._early = self._early or set(), None  # channels start first: these are being decided
        for record in unanswered:
            if record.message.platform not in self._channels or record.id in early:
                continue
            log.info("recovering unanswered message session=%s inbound=%s", record.session_key, record.id)
            self._spawn(self._process(record.message, record.session_key, record.id, record.received_at,
                                      recovered=True), f"recover {record.id}")

    async def aclose(self) -> None:
        """Cancel every run and inbound task and wait for them; stop delivering."""
        await self.dispatcher.aclose()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        await self._delivery.aclose()

    # -- deciding ----------------------------------------------------------------------

    async def _process(self, msg: InboundMessage, key: str, inbound_id: int, received: float, *,
                       recovered: bool = False) -> None:
        try:
            await self._decide(msg, key, inbound_id, received, recovered=recovered)
        except Exception:  # a full disk, a file where the inbox should be, a store error: one sentence
            log.exception("inbound %s failed before its run session=%s", inbound_id, key)
            await self._notice(msg, FAILED, (inbound_id,), "failed", failed=True)

    async def _decide(self, msg: InboundMessage, key: str, inbound_id: int, received: float, *,
                      recovered: bool = False) -> None:
        command = parse_command(msg.text)
        async with self._inbound:
            if command is not None and command.name in URGENT:  # never behind a download
                if await self._allowed(msg, inbound_id):
                    await self._command(command, msg, key, inbound_id)
                return
            lane, users = self._lanes.setdefault(key, (asyncio.Lock(), [0]))
            users[0] += 1
            try:
                async with lane:  # in arrival order; a run itself is never waited for here
                    if not await self._allowed(msg, inbound_id):
                        return
                    if command is not None:
                        await self._command(command, msg, key, inbound_id)
                        return
                    if not await self._within_limits(msg, inbound_id):
                        return
                    if recovered and time.time() - received > self._settings.recover_max_age:
                        preview = " ".join(msg.text.split())[:60]
                        await self._notice(msg, "Sorry, I was restarted before I could answer your message"
                                                f" (“{preview}”). Please send it again.", (inbound_id,), "late")
                        return
                    fetched = await self._fetch(msg, inbound_id, key)
                    if fetched is not None:
                        self._submit(key, Pending(fetched, inbound_id))
            finally:
                users[0] -= 1
                if not users[0]:
                    del self._lanes[key]

    async def _allowed(self, msg: InboundMessage, inbound_id: int) -> bool:
        decision = await self._access.check(msg)
        if decision.action is Action.RUN:
            return True
        log.debug("not run (%s: %s) %s:%s inbound=%s", decision.action, decision.reason, msg.platform,
                  msg.chat_id, inbound_id)
        if decision.action is Action.CONTEXT:
            self._context.remember(msg)
            await self._store.keep_as_context(inbound_id)  # pruned after storage.retention.context
            return False
        await self._store.forget_inbound(inbound_id)  # refused or ignored: only the dedupe key stays
        if decision.reply:
            await self._notice(msg, decision.reply, (), "access")
        return False

    async def _within_limits(self, msg: InboundMessage, inbound_id: int) -> bool:
        """The person's rate and daily budgets (owners exempt); over one, the message is
        answered with one sentence (once per window, then quietly) and not run."""
        if self._limits is None or self._access.is_owner(msg):
            return True
        refusal = await self._limits.check_all(limit_keys(msg))
        if refusal is None:
            return True
        log.info("over the %s limit %s:%s inbound=%s", refusal.reason, msg.platform, msg.sender.id, inbound_id)
        if refusal.text:
            await self._notice(msg, refusal.text, (inbound_id,), "limit")
        else:
            await self._store.mark_answered((inbound_id,))
        return False

    async def _fetch(self, msg: InboundMessage, inbound_id: int, key: str) -> InboundMessage | None:
        """The message with its files saved in the workspace's inbox; None when it was refused
        (too big, or the platform would not give the file), with a notice."""
        todo = [a for a in msg.attachments if a.path is None]
        if not todo:
            return msg
        limit = (self._settings.max_download or {}).get(msg.platform, 20 * 1024 * 1024)
        too_big = next((a for a in todo if a.size is not None and a.size > limit), None)
        channel = self._channels[msg.platform]
        workspace = await self._agent.workspace(msg)
        saved = {}
        try:
            if too_big is not None:
                raise SendFailed(f"“{too_big.name}” is {too_big.size / 1048576:.1f} MB; I can take files up to "
                                 f"{limit / 1048576:.0f} MB.", permanent=True)
            async with self._downloads:
                for att in todo:
                    data = await channel.fetch(att, limit)
                    path = await asyncio.to_thread(save_upload, workspace, att.name, data)
                    saved[id(att)] = replace(att, path=path, size=len(data), data=None)
        except OutsideWorkspaceError:  # a link planted in the workspace: never followed out
            log.warning("files of inbound %s not saved session=%s: inbox/ leads outside the workspace", inbound_id, key)
            await self._notice(msg, UNSAVED, (inbound_id,), "file")
            return None
        except SendFailed as exc:
            log.info("files of inbound %s not taken session=%s: %s", inbound_id, key, exc)
            text = str(exc) if too_big is not None else "Sorry, I could not download your file; please send it again."
            await self._notice(msg, text, (inbound_id,), "file")
            return None
        fetched = replace(msg, attachments=tuple(saved.get(id(a), a) for a in msg.attachments))
        await self._store.update_inbound(inbound_id, fetched)
        return fetched

    def _submit(self, key: str, pending: Pending) -> None:
        if self.dispatcher.submit(key, pending) is Admission.REJECTED:
            log.warning("queue full session=%s; message %s not queued", key, pending.msg.message_id)
            self._spawn(self._notice(pending.msg, BUSY, (pending.inbound_id,), "busy"), "busy notice")

    # -- running -----------------------------------------------------------------------

    async def _execute(self, run: ActiveRun) -> None:
        """Run one batch and hand its answer to delivery (the dispatcher owns this task: /stop
        cancels it); then, when the session grew past its limits, compact it in a task of its
        own that /stop cancels too."""
        compacts = tuple(p for p in run.batch if _is_compact(p.msg))
        batch = tuple(p for p in run.batch if p not in compacts)
        if compacts:  # /compact runs in the session's lane, like a run
            await self._compact(run.session_key, compacts)
        if not batch:
            return
        last = batch[-1].msg
        channel = self._channels[last.platform]
        target = Target.of(last)
        ids = tuple(p.inbound_id for p in batch)
        async with Progress(channel, target, channel.streaming) as progress:
            self._progress[run.run_id] = progress

            async def reply(text: str, failed: bool) -> Answer:
                draft = await progress.settle()
                return answer_for(channel, run.run_id, target, text, inbound_ids=ids, draft_id=draft, failed=failed)

            try:
                session = await self._store.session(run.session_key)
                context = self._context.take(last) if last.chat_type is ChatType.GROUP else ()
                owner = all(self._access.is_owner(p.msg) for p in batch)
                request = RunRequest(run.run_id, session, run.session_key, tuple(p.msg for p in batch), ids,
                                     context=context, reply=reply, sender_is_owner=owner,
                                     tool_policy=self._policy(last, owner), payers=_payers(batch))
                result = await self._agent.run(request)
            except asyncio.CancelledError:
                if run.stopped:  # "Stopped." answers the /stop message: end this run's own status too
                    self._spawn(_quietly(channel.status(target, Status.FAILED)), "stopped status")
                raise
            except Exception:  # the agent turns its own failures into results: this is the store or a bug
                log.exception("run failed outside the agent session=%s run=%s", run.session_key, run.run_id)
                await progress.settle()
                await self._notice(last, FAILED, ids, "failed", failed=True)
                return
            finally:
                del self._progress[run.run_id]
                self._extra.pop(run.run_id, None)
        self._finish(channel, target, result)  # its model calls were charged as they came (RunRequest.payers)
        self._compact_later(request, result)

    def _compact_later(self, request: RunRequest, result: RunResult) -> None:
        """Compact the session after its run if it grew past its limits, in a task of its own:
        the session's next message never waits for a summary; /stop cancels it like a run."""
        key = request.session_key
        if key in self._compacting or not self._agent.may_compact(result):
            return
        task = self._compacting[key] = self._spawn(self._agent.compact_after(request, result), f"compaction {key}")

        def forget(done: asyncio.Task[Any]) -> None:
            if self._compacting.get(key) is done:
                del self._compacting[key]

        task.add_done_callback(forget)

    def _policy(self, msg: InboundMessage, owner: bool) -> ToolPolicy | None:
        return self._settings.tool_policy(msg, owner) if self._settings.tool_policy else None

    async def _compact(self, key: str, batch: tuple[Pending, ...]) -> None:
        msg = batch[-1].msg
        session = await self._store.session(key)
        owner = self._access.is_owner(msg)
        result = await self._agent.compact(session, msg, run_id=f"compact-{batch[-1].inbound_id}",
                                           tool_policy=self._policy(msg, owner), sender_is_owner=owner,
                                           payers=_payers(batch))
        await self._notice(msg, compact_reply(result), tuple(p.inbound_id for p in batch), "compact")

    def _finish(self, channel: Channel, target: Target, result: RunResult) -> None:
        if result.answer is not None:
            self._delivery.push(result.answer)
        elif result.status is RunStatus.SILENT:
            self._spawn(_quietly(channel.status(target, Status.SILENT)), "silent status")

    async def _queued(self, run: ActiveRun) -> None:
        log.info("run waits for a slot session=%s run=%s", run.session_key, run.run_id)
        await self._events.emit(RunEvent(EventKind.ACTIVITY, run.run_id, run.session_key, "queued"))

    async def _discarded(self, batch: tuple[Pending, ...]) -> None:
        await self._store.mark_answered(p.inbound_id for p in batch)

    # -- commands ----------------------------------------------------------------------

    async def _command(self, command: Command, msg: InboundMessage, key: str, inbound_id: int) -> None:
        ids: tuple[int, ...] = (inbound_id,)
        if command.name == "stop":
            active = self.dispatcher.active(key)
            stopped, dropped = await self.dispatcher.stop(key)
            if (compaction := self._compacting.pop(key, None)) is not None and not compaction.done():
                compaction.cancel()
                await asyncio.wait({compaction})
                stopped = True
            if stopped and active is not None:  # the stopped run's messages are answered by this notice
                ids += tuple(p.inbound_id for p in active.batch)
            text = "Stopped." if stopped else "Nothing is running."
            if dropped:
                text += f" {dropped} waiting message{'s' if dropped != 1 else ''} dropped."
        elif command.name == "stopall":
            if not self._access.is_owner(msg):
                if msg.chat_type is not ChatType.DM:
                    await self._store.mark_answered(ids)  # not for them: no reply in groups
                    return
                text = "Only an owner can use /stopall."
            else:
                count = await self.dispatcher.stop_chat(msg.platform, msg.chat_id)
                text = f"Stopped {count} run{'s' if count != 1 else ''}."
        elif command.name in ("new", "reset"):
            await self.dispatcher.stop(key)
            await self._store.session(key, fresh=True)
            text = "Started a fresh conversation. The old one is kept."
        elif command.name == "status":
            text = await self._status(key, msg)
        elif command.name == "compact":  # model calls: within the person's limits, like a message
            if await self._within_limits(msg, inbound_id):
                self._submit(key, Pending(msg, inbound_id))  # in the session's lane, after its run
            return
        elif command.name == "whoami":
            where = "this DM" if msg.chat_type is ChatType.DM else f"chat {msg.chat_id}"
            text = f"Your {msg.platform} id is {msg.sender.id} ({where})."
        else:  # help, start
            text = HELP
        await self._notice(msg, text, ids, "cmd")

    async def _status(self, key: str, msg: InboundMessage) -> str:
        s = self._agent.settings
        session = await self._store.session(key)
        tokens = await self._agent.next_request_tokens(session, msg)
        last = await self._agent.last_compaction(session)
        usage = await self._store.usage(session)
        today = ""
        if self._limits is not None:
            tokens, spent = await self._limits.today(f"{msg.platform}:{msg.sender.id}")
            today = "\n" + budget_line(self._limits.settings, tokens, spent)
        return status_text(model=s.model, context_tokens=tokens, context_window=s.context_window,
                           input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost,
                           turns=usage.turns, running=self.dispatcher.active(key) is not None,
                           queued=self.dispatcher.queued(key), cache_read_tokens=usage.cache_read_tokens,
                           last_compaction=(last.tokens_before, last.tokens_after) if last else None) + today

    # -- sending -----------------------------------------------------------------------

    async def _notice(self, msg: InboundMessage, text: str, inbound_ids: tuple[int, ...], kind: str, *,
                      failed: bool = False) -> None:
        """Owe the chat one short message (stored, then delivered like any answer)."""
        channel = self._channels[msg.platform]
        answer_id = f"{kind}-{msg.platform}-{msg.chat_id}-{msg.message_id}"
        answer = answer_for(channel, answer_id, Target.of(msg), text, inbound_ids=inbound_ids, failed=failed)
        await self._store.store_answer(answer)
        self._delivery.push(answer)

    async def send(self, run_id: str, text: str) -> None:
        """The ``message`` tool's Messenger: an extra message to the chat the run serves, stored
        and delivered like any answer, before the run's final answer; it counts against the
        person's message rate (``PermissionError`` when over)."""
        run = self.dispatcher.registry.get(run_id)
        if run is None:
            raise LookupError(run_id)
        last = run.batch[-1].msg
        if self._limits is not None and not self._access.is_owner(last):
            refusal = await self._limits.check(f"{last.platform}:{last.sender.id}")  # counts like a message
            if refusal is not None:
                raise PermissionError(f"over the person's {refusal.reason} limit")
        channel = self._channels[last.platform]
        self._extra[run_id] = n = self._extra.get(run_id, 0) + 1
        answer = answer_for(channel, f"{run_id}-message-{n}", Target.of(last), text)
        await self._store.store_answer(answer)
        self._delivery.push(answer)

    # -- plumbing ----------------------------------------------------------------------

    async def _prune_context(self) -> None:
        while True:
            try:
                gone = await self._store.prune_context(time.time() - self._settings.context_retention)
                if gone:
                    log.info("pruned %d stored group context messages past their retention", gone)
            except Exception:  # a busy or full disk: try again at the next round
                log.exception("pruning stored group context failed")
            await asyncio.sleep(PRUNE_EVERY)

    def _route(self, event: RunEvent) -> None:
        progress = self._progress.get(event.run_id)
        if progress is not None:
            progress.feed(event)

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s failed", task.get_name(), exc_info=exc)


def _payers(batch: Sequence[Pending]) -> tuple[str, ...]:
    """Whom a batch's model calls are charged to: each sender once, split evenly (one posting as
    a channel is charged on the chat's shared key, so many channels never mean many budgets)."""
    return tuple(dict.fromkeys(limit_keys(p.msg)[0] for p in batch))


def _is_compact(msg: InboundMessage) -> bool:
    command = parse_command(msg.text)
    return command is not None and command.name == "compact"


async def _quietly(step: Awaitable[None]) -> None:
    try:
        await step
    except Exception as exc:  # noqa: BLE001 - cosmetic
        log.debug("status update failed: %s", exc)
