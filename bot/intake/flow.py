"""Inbound message -> stored -> access -> commands -> files -> the turn runner.

``handle`` is every channel's ``Inbox``: it stores the message (deduped by platform,
account, chat and message id), builds its ``Conversation`` once, and puts it in its
session's intake lane, then returns, so the channel may confirm the event. Each session
decides its messages in arrival order in a lane of its own (a queue and one worker task
that lives while there is work): access from metadata alone (an ignored or refused
message keeps only its dedupe key, and a chat the policy ignores gets nothing), commands
(``bot.commands``), the person's limits, then the message's files, fetched through its
channel into the workspace's inbox (this is the only place uploads are saved), and the
message goes on to be run. The lane is the session's one lane in the turn runner
(``bot.runs``): its first stage decides, beside the session's active run, so that
``/status`` answers while a run goes on. A slow download holds only its own session;
``/stop`` and ``/stopall`` never wait in a lane at all.

A message a running capability's inbound stage wants (``bot.intake.stage``: the media
capability's hears a voice note or audio file) is prepared by that stage as soon as it arrives,
outside the lane, through the intake's own steps (``Admits``: access, limits, the fetch); an
urgent command it turns out to be (a spoken ``/stop``) runs at once, the rest keeps its place.

Outstanding inbound work is bounded: ``handle`` waits for room once ``max_outstanding``
messages are still being decided, so a channel that awaits its inbox stops taking more
(Telegram stops polling, Slack's acks wait) instead of piling up tasks; a session with
``RunCaps.max_waiting`` messages still waiting to be decided gets its next ones answered busy.

With several instances (``bot.peers``), a stored message goes to its session's lane only on
the instance that owns the lane: ``Peers.claim`` takes it, or tells the owner, which reads the
message from the store (``take``). The intake is the cluster's ``Host``. Urgent commands and
presses are answered by the instance that received them (``/stop`` reaching the run wherever
it is, through the turn runner).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TypeVar

from bot import observe
from bot.access import Access, Action, GroupContext
from bot.agent.loop import FAILED, Agent
from bot.capabilities.spec import Answers, DecidesHere, Presses, Reminds, StatusLines
from bot.channels import Channel, OfPeople, SendFailed, spelling
from bot.commands import CommandCall, Reply, by_name, parse_command, status_text
from bot.conversation import Conversation, conversation_for
from bot.intake.item import IntakeSettings, Item
from bot.intake.stage import InboundStage, Prepares
from bot.limits import PersonLimits, budget_line
from bot.messages import Answer, ChatType, InboundMessage
from bot.observe import Signal
from bot.peers import Peers, Stopped
from bot.routing.spec import model_line
from bot.store.base import InboundRecord
from bot.tasks import OwnedTasks
from bot.turns import BUSY, Keys, Turns, TurnStore
from bot.workspace import OutsideWorkspaceError, Workspaces, save_upload

log = logging.getLogger(__name__)

T = TypeVar("T")
UNSAVED = ("Sorry, I could not save your file: inbox/ in your workspace is a link that leads outside it. "
           "Remove that link and send the file again.")
MAX_DOWNLOADS = 8  # files fetched at once (each session fetches its own in order)
PRUNE_EVERY = 3600.0  # seconds between two prunings of stored group context


class Intake:
    def __init__(self, store: TurnStore, channels: Mapping[str, Channel], access: Access, turns: Turns,
                 workspaces: Workspaces, context: GroupContext, settings: IntakeSettings, *, limits: PersonLimits,
                 keys: Keys, agent: Agent, capabilities: Mapping[str, object], peers: Peers | None) -> None:
        self._store = store
        self._channels = channels
        self._access = access
        self._turns = turns
        self._workspaces = workspaces
        self._context = context
        self._settings = settings
        self.limits = limits if limits.active else None
        self.limit_keys = keys  # whom a message counts against (the linked person where there is one)
        self._agent = agent
        self._capabilities = dict(capabilities)  # the running capabilities by name: their commands' hosts
        self._presses = [c for c in self._capabilities.values() if isinstance(c, Presses)]
        self._status_lines = [c for c in self._capabilities.values() if isinstance(c, StatusLines)]
        self._answers = [c for c in self._capabilities.values() if isinstance(c, Answers)]  # an approval's card
        self._reminds = [c for c in self._capabilities.values() if isinstance(c, Reminds)]
        self._deciders = [c for c in self._capabilities.values() if isinstance(c, DecidesHere)]
        self._stages = [s for c in self._capabilities.values()  # a voice note heard before its turn
                        if isinstance(c, Prepares) and (s := c.inbound_stage()) is not None]
        self._room = asyncio.Semaphore(settings.max_outstanding)
        self._downloads = asyncio.Semaphore(MAX_DOWNLOADS)
        self._tasks = OwnedTasks()
        self._peers = peers
        # inbound ids the channels handed over before recover() looked (with peers, claims sort that out)
        self._early: set[int] | None = set() if peers is None else None
        self._recovered: frozenset[int] = frozenset()  # the ids recover() took: a channel's late handle skips them

    # -- the channels' inbox -------------------------------------------------------------

    def conversation(self, msg: InboundMessage) -> Conversation:
        """The conversation ``msg`` belongs to: built here, where a turn enters, and carried on."""
        if isinstance(c := self._channels.get(msg.platform), OfPeople) and (named := c.conversation_of(msg)):
            return named
        s = self._settings
        return conversation_for(msg, s.agent_id, dm_scope=s.dm_scope, identity_links=s.identity_links,
                                group_scope=s.group_scope, channel=(s.channel_info or {}).get(msg.platform))

    async def handle(self, msg: InboundMessage) -> None:
        """The channels' inbox: returns once ``msg`` is stored (raises if it could not be), and,
        when ``max_outstanding`` messages are being decided, once there is room again."""
        conversation = self.conversation(msg)
        inbound_id = await self._store.record_inbound(msg, conversation)
        if inbound_id is None:
            log.info("redelivered message ignored session=%s message=%s", conversation.session_key, msg.message_id)
            return
        observe.signal(Signal.MESSAGE_IN, platform=msg.platform)
        if self._early is not None:
            self._early.add(inbound_id)
        elif inbound_id in self._recovered:  # stored just before recover() read it: recover() has it
            return
        await self._enqueue(Item(msg, conversation, inbound_id, time.time()))

    async def recover(self) -> None:
        """Start-up: first deliver what is owed, then decide again what was never answered;
        from then on, prune stored group context past its retention every hour."""
        self._tasks.spawn(self._prune_context(), "context pruning")
        await self._turns.resume()
        if self._peers is not None:  # what nobody holds: this instance's earlier life's, a dead one's
            await self._peers.sweep()
            return
        unanswered = await self._store.unanswered()
        # channels start first: what they handed over is theirs to decide, the rest is ours; both
        # sides look at these sets without waiting in between, so no message is decided twice
        early, self._early = self._early or set(), None
        self._recovered = frozenset(record.id for record in unanswered if record.id not in early)
        for record in unanswered:
            if record.message.platform not in self._channels or record.id in early:
                continue
            log.info("recovering unanswered message session=%s inbound=%s", record.session_key, record.id)
            await self._enqueue(Item(record.message, self.conversation(record.message), record.id,
                                      record.received_at, recovered=True))

    async def aclose(self) -> None:
        """Stop the intake's own tasks (the lanes are the turn runner's: it closes them)."""
        await self._tasks.stop()

    def _at_once(self, item: Item) -> Callable[[Item], Awaitable[None]] | None:
        """How a press (an approval's, the model picker's) or an urgent command is answered: at
        once, by the instance that received it, never in a lane; None for everything else."""
        for answers in self._answers:  # an approval's card: a run waits for it
            if answers.answers(item.msg):
                return partial(self._press, answers)
        for capability in self._presses:  # the model picker's
            if capability.claims(item.msg):
                return partial(self._claimed, capability)
        command = parse_command(item.msg.text)
        if command is not None and by_name(command.name).urgent:
            return self._urgent  # never behind the lane
        return None

    async def _enqueue(self, item: Item, *, claimed: bool = False) -> None:
        if (answer := self._at_once(item)) is not None:
            self._tasks.spawn(answer(item), f"at once {item.inbound_id}")
            return
        await self._room.acquire()  # backpressure: the channel waits here, nothing piles up
        if self._peers is not None and not claimed:
            try:
                mine = await self._peers.claim(InboundRecord(item.inbound_id, item.conversation.session_key, item.msg,
                                                              item.received))
            except BaseException:
                self._room.release()
                raise
            if not mine:  # another instance runs the session (it was told), or took this message already
                self._room.release()
                return
        prepared: asyncio.Future[Item | None] | None = None
        if (stage := next((s for s in self._stages if s.wants(item.msg)), None)) is not None:
            # prepared now, decided in its turn
            prepared = self._tasks.spawn(self._process(item, partial(self._prepare, stage)),
                                         f"{stage.name} {item.inbound_id}")
        if not self._turns.decide(item.conversation, lambda: self._step(item, prepared)):
            self._room.release()
            if prepared is not None:
                prepared.cancel()
            log.warning("intake lane full session=%s; message %s answered busy", item.conversation.session_key,
                        item.msg.message_id)
            self._tasks.spawn(self._turns.outbox.notice(item.msg, BUSY, (item.inbound_id,), "busy"), "busy notice")

    async def _step(self, item: Item, prepared: asyncio.Future[Item | None] | None) -> None:
        try:
            if prepared is None:
                await self._process(item, self._decide)
            elif (done := await prepared) is not None:
                await self._process(done, self._decide_prepared)
        finally:
            self._room.release()

    # -- the cluster's Host (bot.peers) --------------------------------------------------

    async def take(self, record: InboundRecord) -> None:
        item = Item(record.message, self.conversation(record.message), record.id, record.received_at,
                     recovered=True)
        if self._at_once(item) is not None:  # its own instance answers it; one that died left it moot
            await self._store.mark_answered((record.id,))
            return
        await self._enqueue(item, claimed=True)

    async def stop_here(self, session_key: str) -> Stopped:
        return await self._turns.stop_here(session_key)

    async def stop_chat_here(self, platform: str, chat_id: str) -> int:
        return await self._turns.dispatcher.stop_chat(platform, chat_id)

    def busy(self, session_key: str) -> bool:
        return self._turns.dispatcher.busy(session_key)

    def abandon(self, session_key: str) -> None:
        self._turns.dispatcher.abandon(session_key)

    def deliver(self, answer: Answer) -> None:
        self._turns.outbox.push(answer)

    async def decide_here(self, approval_id: str, decision: str, msg: InboundMessage) -> str | None:
        for decider in self._deciders:
            return await decider.decide_here(approval_id, decision, msg)
        return "Nothing waits for approval here."

    # -- deciding ----------------------------------------------------------------------

    async def _urgent(self, item: Item) -> None:
        try:
            if await self._allowed(item):
                await self._command(item)
        except Exception:
            log.exception("command %s failed session=%s", item.inbound_id, item.conversation.session_key)
            await self._turns.outbox.notice(item.msg, FAILED, (item.inbound_id,), "failed", failed=True)

    async def _press(self, answers: Answers, item: Item) -> None:
        """A card's button pressed: never a message for the model; answered by the press's own
        reply (who may press, its capability decides)."""
        try:
            await answers.answer(item.msg)
        finally:
            await self._store.mark_answered((item.inbound_id,))

    async def _claimed(self, capability: Presses, item: Item) -> None:
        """A capability's button (a model picker's): its press, if the presser passes access;
        never a message for the model."""
        try:
            if await self._allowed(item):
                await capability.press(item.msg, item.conversation, self._access.is_owner(item.msg))
        finally:
            await self._store.mark_answered((item.inbound_id,))

    async def _process(self, item: Item, stage: Callable[[Item], Awaitable[T]]) -> T | None:
        try:
            return await stage(item)
        except asyncio.CancelledError:
            raise
        except Exception:  # a full disk, a file where the inbox should be, a store error: one sentence
            log.exception("inbound %s failed before its run session=%s", item.inbound_id,
                          item.conversation.session_key)
            await self._turns.outbox.notice(item.msg, FAILED, (item.inbound_id,), "failed", failed=True)
            return None

    async def _prepare(self, stage: InboundStage, item: Item) -> Item | None:
        """``stage``'s part, outside the lane: the message it made stored (a recovered message is
        not prepared twice), and an urgent command it turned out to be run here and now."""
        done = await stage.prepare(item, self)
        if done is None:
            return None
        await self._store.update_inbound(done.inbound_id, done.msg)
        command = parse_command(done.msg.text)
        if command is not None and by_name(command.name).urgent:
            await self._command(done)
            return None
        return done

    async def _decide_prepared(self, item: Item) -> None:
        """The lane's part of a prepared message (its checks passed): a command in its turn, else its run."""
        if parse_command(item.msg.text) is not None:
            await self._command(item)
        else:
            self._turns.submit(item.conversation, item.msg, item.inbound_id)

    async def _decide(self, item: Item) -> None:
        msg = item.msg
        if not await self._allowed(item):
            return
        if parse_command(msg.text) is not None:
            await self._command(item)
            return
        if not await self._within_limits(msg, item.inbound_id) or await self._late(item):
            return
        fetched = await self.fetch(item)
        if fetched is not None:
            self._turns.submit(item.conversation, fetched, item.inbound_id)
            for reminds in self._reminds:
                if (reminder := reminds.remind(item.conversation.session_key, self.spelling_for(msg.platform))):
                    await self._turns.outbox.notice(msg, reminder, (), "remind")

    # -- what an inbound stage may take (bot.intake.stage.Admits) ----------------------

    async def admit(self, item: Item) -> bool:
        return await self._allowed(item) and await self._within_limits(item.msg, item.inbound_id) \
            and not await self._late(item)

    async def keep_as_context(self, item: Item, msg: InboundMessage) -> None:
        self._context.remember(msg)
        await self._store.keep_as_context(item.inbound_id)

    def payers(self, msg: InboundMessage) -> tuple[str, ...]:
        return () if self._access.is_owner(msg) else self.limit_keys(msg)

    def max_download(self, platform: str) -> int:
        return (self._settings.max_download or {}).get(platform, 20 * 1024 * 1024)

    async def _late(self, item: Item) -> bool:
        """A recovered message past ``recover_max_age``: the person is asked to send it again."""
        if not item.recovered or time.time() - item.received <= self._settings.recover_max_age:
            return False
        preview = " ".join(item.msg.text.split())[:60]
        await self._turns.outbox.notice(item.msg, "Sorry, I was restarted before I could answer your message"
                                           f" (“{preview}”). Please send it again.", (item.inbound_id,), "late")
        return True

    async def _allowed(self, item: Item) -> bool:
        msg, inbound_id = item.msg, item.inbound_id
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
        observe.signal(Signal.NOT_RUN, platform=msg.platform, reason=decision.action.value)
        if decision.reply:
            await self._turns.outbox.notice(msg, decision.reply, (), "access")
        return False

    async def _within_limits(self, msg: InboundMessage, inbound_id: int) -> bool:
        """The person's rate and daily budgets (owners exempt); over one, the message is
        answered with one sentence (once per window, then quietly) and not run."""
        if self.limits is None or self._access.is_owner(msg):
            return True
        refusal = await self.limits.check_all(self.limit_keys(msg))
        if refusal is None:
            return True
        log.info("over the %s limit %s:%s inbound=%s", refusal.reason, msg.platform, msg.sender.id, inbound_id)
        observe.signal(Signal.NOT_RUN, platform=msg.platform, reason="limit")
        if refusal.text:
            await self._turns.outbox.notice(msg, refusal.text, (inbound_id,), "limit")
        else:
            await self._store.mark_answered((inbound_id,))
        return False

    async def fetch(self, item: Item, downloaded: Mapping[int, bytes] | None = None) -> InboundMessage | None:
        """The message with its files saved in the workspace's inbox (``downloaded``: bytes already
        downloaded, by ``id`` of their attachment); None when it was refused (too big, or the
        platform would not give the file), with a notice."""
        msg, inbound_id = item.msg, item.inbound_id
        todo = [a for a in msg.attachments if a.path is None]
        if not todo:
            return msg
        limit = self.max_download(msg.platform)
        too_big = next((a for a in todo if a.size is not None and a.size > limit), None)
        channel = self._channels[msg.platform]
        saved = {}
        try:
            if too_big is not None and too_big.size is not None:
                raise SendFailed(f"“{too_big.name}” is {too_big.size / 1048576:.1f} MB; I can take files up to "
                                 f"{limit / 1048576:.0f} MB.", permanent=True)
            workspace = await self._workspaces.prepare(item.conversation)
            async with self._downloads:
                for att in todo:
                    data = (downloaded or {}).get(id(att)) or await channel.fetch(att, limit)
                    path = await asyncio.to_thread(save_upload, workspace, att.name, data)
                    saved[id(att)] = replace(att, path=path, size=len(data), data=None)
        except OutsideWorkspaceError:  # a link planted in the workspace: never followed out
            log.warning("files of inbound %s not saved session=%s: inbox/ leads outside the workspace", inbound_id,
                        item.conversation.session_key)
            await self._turns.outbox.notice(msg, UNSAVED, (inbound_id,), "file")
            return None
        except SendFailed as exc:
            log.info("files of inbound %s not taken session=%s: %s", inbound_id, item.conversation.session_key, exc)
            text = str(exc) if too_big is not None else "Sorry, I could not download your file; please send it again."
            await self._turns.outbox.notice(msg, text, (inbound_id,), "file")
            return None
        fetched = replace(msg, attachments=tuple(saved.get(id(a), a) for a in msg.attachments))
        await self._store.update_inbound(inbound_id, fetched)
        return fetched

    # -- commands: the table in bot.commands; this is its CommandHost --------------------

    async def _command(self, item: Item) -> None:
        command = parse_command(item.msg.text)
        assert command is not None
        spec = by_name(command.name)
        call = CommandCall(command, item.msg, item.conversation, item.inbound_id, self._access.is_owner(item.msg),
                           self.spelling_for(item.msg.platform))
        host = self._capabilities.get(spec.capability) if spec.capability else self
        if spec.owners_only and not call.owner:
            if item.msg.chat_type is not ChatType.DM:
                await self._store.mark_answered((item.inbound_id,))  # not for them: no reply in groups
                return
            reply: Reply | None = Reply(f"Only an owner can use /{spec.name}.")
        elif host is None:  # a capability that is switched off
            reply = Reply(spec.off or f"/{spec.name} is not available here.")
        else:
            reply = await spec.handler(host, call)
        if reply is not None:
            await self._turns.outbox.notice(item.msg, reply.text, (item.inbound_id, *reply.also_answers), "cmd")

    async def stop(self, conversation: Conversation) -> tuple[bool, int, tuple[int, ...]]:
        return await self._turns.stop(conversation)

    async def stop_chat(self, platform: str, chat_id: str) -> int:
        return await self._turns.stop_chat(platform, chat_id)

    async def fresh(self, conversation: Conversation) -> None:
        await self._turns.stop(conversation)
        await self._store.session(conversation, fresh=True)

    async def status(self, call: CommandCall) -> str:
        key = call.conversation.session_key
        session = await self._store.session(call.conversation)
        tokens = await self._agent.next_request_tokens(session, call.conversation)
        last = await self._agent.last_compaction(session)
        usage = await self._store.usage(session)
        dispatcher = self._turns.dispatcher
        route = (await self._agent.plan(call.conversation)).route
        text = status_text(model=model_line(route), context_tokens=tokens, context_window=route.spec.context_window,
                           input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost,
                           turns=usage.turns, running=dispatcher.active(key) is not None,
                           queued=dispatcher.queued(key), cache_read_tokens=usage.cache_read_tokens,
                           last_compaction=(last.tokens_before, last.tokens_after) if last else None)
        if self.limits is not None:
            tokens, spent = await self.limits.today(self.limit_keys(call.msg)[-1])
            text += "\n" + budget_line(self.limits.settings, tokens, spent)
        for capability in self._status_lines:
            text += "".join(f"\n{line}" for line in await capability.status_lines(call))
        return text

    def spelling_for(self, platform: str) -> Callable[[str], str]:
        return spelling(self._channels.get(platform))

    async def compact(self, call: CommandCall) -> None:
        if await self._within_limits(call.msg, call.inbound_id):  # model calls: within the limits, like a message
            self._turns.submit(call.conversation, call.msg, call.inbound_id)  # in the session's lane, after its run

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
