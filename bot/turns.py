"""The turn runner: a Conversation and its input -> progress, the run, one commit, delivery.

A turn starts from any source: stored inbound messages the intake decided to run
(``submit``), or a text with no inbound message (``run_task``: a scheduled job). Either way
it waits in its session's lane (``bot.runs``: one run per session, queue modes, caps), then
runs here: the chat's progress (status, a streamed draft) while the agent computes the turn,
then the answer is rendered for the channel and committed with the turn in one transaction,
and handed to delivery (``bot.delivery``), outside the run's slot. The agent never calls
back: it returns an uncommitted turn.

When another model answers for the conversation's own (a fallback), the run calls its
``notify`` (once per chat and model) before the first word of that answer: the note is
stored and queued for delivery then, so it reaches the chat as a message of its own, first.

``/stop`` cancels the run and returns as soon as the run has ended (its turn stored, so
the history stays valid): the confirmation is sent before the stopped draft is settled,
which happens afterwards in a task of its own, still keeping the draft's edit interval.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from bot import observe
from bot.access import GroupContext
from bot.agent.compaction import compact_reply
from bot.agent.events import EventBus, EventKind, Phase, RunEvent
from bot.agent.loop import FAILED, Agent, RunRequest, RunResult, RunStatus, senders
from bot.channels import Channel, Status
from bot.commands import parse_command, stop_text
from bot.conversation import Conversation
from bot.delivery import Delivery, quietly
from bot.limits import PersonLimits
from bot.messages import Answer, Chunk, FileRef, InboundMessage, Target
from bot.observe import Signal
from bot.outbound.outbox import Outbox
from bot.outbound.progress import Progress
from bot.outbound.split import render_chunks
from bot.peers import Peers, Stopped
from bot.runs import ActiveRun, Admission, Decide, Dispatcher, Pending, RunCaps, TaskOrder
from bot.stages import Speaking
from bot.store.base import AnswerStore, LaneLost, Store, TurnWrite
from bot.tasks import OwnedTasks
from bot.tools.policy import ToolPolicy
from bot.tools.send_file import QUEUED

log = logging.getLogger(__name__)

FILE_WAIT = 90.0  # seconds send_file waits for the platform to take a file (then it stays owed)
BUSY = "I'm still busy, your message was not queued. Send it again when I've answered, or /stop."

PolicyFor = Callable[[Conversation, bool], ToolPolicy]  # (conversation, every sender an owner)
Owner = Callable[[InboundMessage], bool]
Keys = Callable[[InboundMessage], tuple[str, ...]]  # whom a message counts against (PersonLimits keys)
Footer = Callable[[RunResult], str]  # a short line under a completed run's answer ("": none)


class TurnStore(Store, AnswerStore, Protocol):
    """The store the turn runner needs: sessions and turns, and what is owed to chats."""


class Turns:
    def __init__(self, agent: Agent, store: TurnStore, events: EventBus, channels: Mapping[str, Channel],
                 delivery: Delivery, context: GroupContext, *, caps: RunCaps, is_owner: Owner, keys: Keys,
                 policy: PolicyFor, person_limits: PersonLimits, peers: Peers | None) -> None:
        self._agent = agent
        self._store = store
        self._events = events
        self._channels = channels
        self._delivery = delivery
        self.outbox = Outbox(store, delivery, channels)  # the one way to owe a chat a message
        self._context = context
        self._is_owner = is_owner
        self._keys = keys
        self._policy = policy
        self._limits = person_limits if person_limits.active else None
        self._voices: list[Speaking] = []  # what speaks answers too (bot.stages), speak_with
        self._peers = peers  # other instances (PostgreSQL): a session's lane may run on one of them
        self.dispatcher = Dispatcher(self._execute, caps, on_queued=self._queued, on_discard=self._discarded,
                                     on_idle=peers.idle if peers is not None else None)
        self._compacting: dict[str, asyncio.Future[Any]] = {}  # session key -> its post-run compaction
        self._footers: list[Footer] = []
        self._tasks = OwnedTasks()
        events.subscribe(self._route)

    def add_footer(self, footer: Footer) -> None:
        """Add a line under every answer a run completes (a capability's: what the run used)."""
        self._footers.append(footer)

    # -- starting turns ----------------------------------------------------------------

    def submit(self, conversation: Conversation, msg: InboundMessage, inbound_id: int) -> Admission:
        """A decided inbound message: run it in its session's lane (or queue it, or refuse it
        with a sentence when the session's queue is full)."""
        admission = self.dispatcher.submit(conversation.session_key,
                                           Pending(msg, inbound_id, conversation=conversation))
        if admission is Admission.REJECTED:
            log.warning("queue full session=%s; message %s not queued", conversation.session_key, msg.message_id)
            self._tasks.spawn(self.outbox.notice(msg, BUSY, (inbound_id,), "busy"), "busy notice")
        return admission

    def decide(self, conversation: Conversation, step: Decide) -> bool:
        """The intake's stage of the session's lane: ``step`` decides one stored message after
        those before it (and ``submit``s it when it is to run); False when too many wait."""
        group = (conversation.platform, conversation.chat_id) if conversation.is_group else None
        return self.dispatcher.decide(conversation.session_key, step, group)

    async def run_task(self, conversation: Conversation, task: str, order: TaskOrder) -> str:
        """A turn with no inbound message (a scheduled job): ``task`` is its input, answered in
        ``conversation``'s chat and delivered like any answer; ``order`` says whom it acts for and
        more (see ``TaskOrder``). Waits until its turn is committed; how it ended: completed,
        silent, failed, stopped (by /stop), or busy (the session's queue was full: not run)."""
        ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if self._peers is not None:  # one run per session across instances: its lane comes here first
            await self._peers.own(conversation.session_key)
        pending = Pending(None, None, conversation, task=task, order=replace(order, ended=ended))
        if self.dispatcher.submit(conversation.session_key, pending) is Admission.REJECTED:
            if self._peers is not None and not self.dispatcher.busy(conversation.session_key):
                self._peers.idle(conversation.session_key)
            return "busy"
        return await ended

    # -- stopping ----------------------------------------------------------------------

    async def stop(self, conversation: Conversation) -> Stopped:
        """Cancel the session's run (and its compaction) and drop its queue; returns once the run
        has ended: (stopped, dropped, the inbound ids of the stopped run, answered by the caller).
        With other instances, the one whose lane it is stops it."""
        if self._peers is not None and (remote := await self._peers.stop(conversation.session_key)) is not None:
            return remote
        return await self.stop_here(conversation.session_key)

    async def stop_here(self, key: str) -> Stopped:
        """``stop`` of a session whose lane is on this instance."""
        with self._peers.keeping(key) if self._peers is not None else nullcontext():
            active = self.dispatcher.active(key)
            began = time.monotonic()
            stopped, dropped = await self.dispatcher.stop(key)
            if stopped and active is not None:
                observe.signal(Signal.STOPPED, platform=active.chat[0], value=time.monotonic() - began)
            if (compaction := self._compacting.pop(key, None)) is not None and not compaction.done():
                compaction.cancel()
                await asyncio.wait({compaction})
                stopped = True
            ids = tuple(p.inbound_id for p in active.batch if p.inbound_id is not None) \
                if stopped and active is not None else ()
            if ids and self._peers is not None:  # settled before the lane can go to another instance
                await self._store.mark_answered(ids)  # (the "Stopped." notice answers them too)
        return stopped, dropped, ids

    async def stop_chat(self, platform: str, chat_id: str) -> int:
        here = await self.dispatcher.stop_chat(platform, chat_id)
        return here + (await self._peers.stop_chat(platform, chat_id) if self._peers is not None else 0)

    async def stop_run(self, run_id: str) -> bool:
        """Stop one run from outside its chat (the dashboard) as ``/stop`` does: the session's run
        and queue end, and the chat is told what ``/stop`` would tell it ("Stopped."), which
        answers the stopped run's messages. False when the run had already ended."""
        run = self.dispatcher.registry.get(run_id)
        if run is None or self.dispatcher.active(run.session_key) is not run:
            return False  # ended meanwhile: never stop the session's next run instead
        conversation = run.batch[-1].conversation
        stopped, dropped, ids = await self.stop(conversation)
        if not stopped:
            return False
        log.info("run stopped from outside its chat session=%s run=%s", conversation.session_key, run_id)
        text = stop_text(stopped, dropped)
        last = next((p.msg for p in reversed(run.batch) if p.msg is not None), None)
        if last is not None:
            await self.outbox.notice(last, text, ids, "stopped")
        else:  # a task (a scheduled job, the dashboard): told in the conversation's chat
            await self.outbox.say(conversation.platform, f"stopped-{run_id}", conversation.target, text,
                                  inbound_ids=ids)
        return True

    async def resume(self) -> None:
        """Start-up: deliver what is owed (before anything new is decided)."""
        await self._delivery.resume()

    async def aclose(self) -> None:
        """Cancel every run and task and wait for them; stop delivering."""
        await self.dispatcher.aclose()
        await self._tasks.stop()
        await self._delivery.aclose()

    # -- running -----------------------------------------------------------------------

    async def _execute(self, run: ActiveRun) -> None:
        """Run one batch and hand its answer to delivery (the dispatcher owns this task: /stop
        cancels it); then, when the session grew past its limits, compact it in a task of its
        own that /stop cancels too."""
        compacts = tuple(p for p in run.batch if p.msg is not None and _is_compact(p.msg))
        batch = tuple(p for p in run.batch if p not in compacts)
        if compacts:  # /compact runs in the session's lane, like a run
            await self._compact(compacts)
        if not batch:
            return
        last = batch[-1]
        conversation = last.conversation
        msgs = tuple(p.msg for p in batch if p.msg is not None)
        ids = tuple(p.inbound_id for p in batch if p.inbound_id is not None)
        channel = self._channels[conversation.platform]
        target = Target.of(msgs[-1]) if msgs else conversation.target
        # a task's order says whom it acts for; messages act for their senders (an owner only if all are)
        order = last.order if last.order is not None else TaskOrder(
            owner=bool(msgs) and all(self._is_owner(m) for m in msgs),
            payers=tuple(dict.fromkeys(self._keys(m)[0] for m in msgs)))
        progress = Progress(channel, target, channel.streaming)
        await progress.__aenter__()
        run.progress, run.conversation = progress, conversation
        try:
            session = await self._store.session(conversation)
            context = self._context.take(msgs[-1]) if msgs and conversation.is_group else ()
            request = RunRequest(run.run_id, session, conversation, msgs, ids, task=last.task,
                                 user_id=order.user_id, users=order.users, context=context, sender_is_owner=order.owner,
                                 tool_policy=self._policy(conversation, order.owner),
                                 payers=order.payers, prompt_mode=order.prompt_mode,
                                 notify=lambda note: self.outbox.say(channel.name, f"{run.run_id}-note", target, note))
            result = await self._agent.run(request)
        except asyncio.CancelledError:  # /stop, an interrupt or shutdown: the confirmation goes first
            self._tasks.spawn(self._settle_stopped(progress, channel, target, run.stopped), "stopped draft")
            order.end("stopped" if run.stopped else None)
            raise
        except LaneLost as exc:  # a cancelled run's turn, refused: another instance has the session now
            await progress.settle()
            _lane_lost(exc, order)
            return
        except Exception:  # the agent turns its own failures into results: this is the store or a bug
            log.exception("run failed outside the agent session=%s run=%s", conversation.session_key, run.run_id)
            await progress.settle()
            await self.outbox.say(channel.name, f"failed-{run.run_id}", target, FAILED, inbound_ids=ids, failed=True)
            order.end("failed")
            return
        finally:
            run.progress = run.conversation = None
        also: tuple[TurnWrite, ...] = (partial(order.commits, str(result.status)),) if order.commits is not None else ()
        try:
            await self._commit(channel, target, run.run_id, ids, result, await progress.settle(), also)
        except LaneLost as exc:  # stored nothing: the instance that took the session over answers it
            _lane_lost(exc, order)
            return
        except BaseException:
            order.end(None)
            raise
        order.end(str(result.status))
        if self._voices and result.status is RunStatus.COMPLETED and result.text:
            self._tasks.spawn(self._speak(channel, target, run.run_id, msgs, result.text), f"voice {run.run_id}")
        await self._agent.finished(request, result)
        self._compact_later(request, result)

    async def _commit(self, channel: Channel, target: Target, run_id: str, ids: tuple[int, ...], result: RunResult,
                      draft: str | None, also: tuple[TurnWrite, ...] = ()) -> None:
        """The turn and its rendered answer in one transaction, then delivery; a silent turn
        settles its messages and leaves no trace in the chat. A task's order may write with its turn
        (``also``, in the same transaction: a scheduled task's occurrence closed, never run again)."""
        assert result.turn is not None, "only a cancelled run's turn is stored by the agent"
        text = result.error or result.text
        if result.status is RunStatus.SILENT or not text:
            await self._store.append_turn(replace(result.turn, also=also))
            if result.status is RunStatus.SILENT:
                self._tasks.spawn(quietly(channel.status(target, Status.SILENT)), "silent status")
            return
        if result.status is RunStatus.COMPLETED and (lines := [line for f in self._footers if (line := f(result))]):
            text = "\n\n".join((text, *lines))
        answer = self.outbox.render(channel.name, run_id, target, text, inbound_ids=ids, draft_id=draft,
                                    failed=result.status is RunStatus.FAILED)
        await self._store.append_turn(replace(result.turn, answer=answer, settle=False, also=also))
        self.outbox.push(answer)

    async def _settle_stopped(self, progress: Progress, channel: Channel, target: Target, stopped: bool) -> None:
        await progress.settle()  # the draft's last edit, after the edit interval
        if stopped:  # "Stopped." answers the /stop message: end this run's own status too
            await quietly(channel.status(target, Status.FAILED))

    def _compact_later(self, request: RunRequest, result: RunResult) -> None:
        """Compact the session after its run if it grew past its limits, in a task of its own:
        the session's next message never waits for a summary; /stop cancels it like a run."""
        key = request.session_key
        if key in self._compacting or not self._agent.may_compact(result):
            return
        task = self._compacting[key] = self._tasks.spawn(self._agent.compact_after(request, result),
                                                         f"compaction {key}")

        def forget(done: asyncio.Future[Any]) -> None:
            if self._compacting.get(key) is done:
                del self._compacting[key]

        task.add_done_callback(forget)

    async def _compact(self, batch: tuple[Pending, ...]) -> None:
        last = batch[-1]
        assert last.msg is not None and last.inbound_id is not None
        msg, conversation = last.msg, last.conversation
        session = await self._store.session(conversation)
        msgs = tuple(p.msg for p in batch if p.msg is not None)
        owner = all(self._is_owner(m) for m in msgs)  # the least rights of the batch's people
        result = await self._agent.compact(session, conversation, run_id=f"compact-{last.inbound_id}",
                                           user_id=msg.sender.id, users=senders(msgs),
                                           tool_policy=self._policy(conversation, owner),
                                           sender_is_owner=owner,
                                           payers=tuple(dict.fromkeys(self._keys(p.msg)[0] for p in batch if p.msg)))
        await self.outbox.notice(msg, compact_reply(result),
                                 tuple(p.inbound_id for p in batch if p.inbound_id is not None), "compact")

    async def _queued(self, run: ActiveRun) -> None:
        log.info("run waits for a slot session=%s run=%s", run.session_key, run.run_id)
        await self._events.emit(RunEvent(EventKind.ACTIVITY, run.run_id, run.batch[-1].conversation,
                                         phase=Phase.QUEUED))

    async def _discarded(self, batch: tuple[Pending, ...]) -> None:
        for pending in batch:
            if pending.order is not None:
                pending.order.end("stopped")
        await self._store.mark_answered(p.inbound_id for p in batch if p.inbound_id is not None)

    # -- sending -----------------------------------------------------------------------

    async def send(self, run_id: str, text: str) -> None:
        """The ``message`` tool's Messenger: an extra message to the chat the run serves, stored
        and delivered like any answer, before the run's final answer; it counts against the
        person's message rate (``PermissionError`` when over)."""
        run, conversation = self._serving(run_id)
        msgs = [p.msg for p in run.batch if p.msg is not None]
        keys = tuple(dict.fromkeys(k for m in msgs if not self._is_owner(m) for k in self._keys(m)))
        if self._limits is not None and keys:  # counts like a message, for every person of the turn
            refusal = await self._limits.check_all(keys)
            if refusal is not None:
                raise PermissionError(f"over the person's {refusal.reason} limit")
        target = Target.of(msgs[-1]) if msgs else conversation.target
        run.extra += 1
        await self.outbox.say(conversation.platform, f"{run_id}-message-{run.extra}", target, text)

    async def _speak(self, channel: Channel, target: Target, run_id: str, msgs: tuple[InboundMessage, ...],
                     text: str) -> None:
        """The answer spoken too, when the chat's /voice asks: a voice note after the text."""
        for voice in self._voices:
            spoken = await voice.spoken(run_id, channel.name, target, msgs, text)
            if spoken is not None:
                await self.outbox.owe(spoken)
                return

    def speak_with(self, speaking: Speaking) -> None:
        """Owe an answer's voice note too, when ``speaking`` makes one (the media capability)."""
        self._voices.append(speaking)

    # -- send_file: the tool's FileSender ----------------------------------------------

    def upload_limit(self, run_id: str) -> tuple[str, int]:
        _, conversation = self._serving(run_id)
        channel = self._channels[conversation.platform]
        return conversation.channel.shown or channel.name, channel.shape.max_upload

    async def send_file(self, run_id: str, ref: FileRef, caption: str, *, photo: bool = False) -> str | None:
        """A workspace file to the chat the run serves, once per message and content, and how it went."""
        run, conversation = self._serving(run_id)
        channel = self._channels[conversation.platform]
        last = run.batch[-1].msg
        target = Target.of(last) if last is not None else conversation.target
        first = next((p.inbound_id for p in run.batch if p.inbound_id is not None), None)
        key = hashlib.sha256(f"{ref.path}\0{ref.sha256}".encode()).hexdigest()[:16]
        answer_id = f"file-{conversation.platform}-{first if first is not None else run_id}-{key}"
        state = await self._store.answer_state(answer_id)
        if state == "delivered":
            return None  # this message had it already (a run repeated after a restart)
        if state == "given_up":
            answer_id = f"{answer_id}-{run_id}"
        rendered = render_chunks(caption, channel.dialect, channel.shape)[:1] if caption else []
        name = ref.path.rsplit("/", 1)[-1]
        chunk = Chunk(rendered[0] if rendered else "", name, file_ref=ref, photo=photo)
        answer = Answer(answer_id, channel.name, target, (chunk,))
        done = self._delivery.outcome(answer_id)
        try:
            if state != "owed":
                await self.outbox.owe(answer)
            return await asyncio.wait_for(asyncio.shield(done), FILE_WAIT)
        except TimeoutError:
            return QUEUED
        finally:
            self._delivery.forget(answer_id, done)

    # -- plumbing ----------------------------------------------------------------------

    def _serving(self, run_id: str) -> tuple[ActiveRun, Conversation]:
        """A run this runner runs now, and the conversation it serves (``LookupError`` once it ended)."""
        run = self.dispatcher.registry.get(run_id)
        if run is None or run.conversation is None:
            raise LookupError(run_id)
        return run, run.conversation

    def _route(self, event: RunEvent) -> None:
        run = self.dispatcher.registry.get(event.run_id)
        if run is not None and run.progress is not None:
            run.progress.feed(event)


def _lane_lost(exc: LaneLost, order: TaskOrder) -> None:
    """This instance was paused past its lease and another took the session over: the turn was not
    stored and nothing is sent from here."""
    log.warning("%s: another instance took the session over; nothing sent from here", exc)
    order.end(None)


def _is_compact(msg: InboundMessage) -> bool:
    command = parse_command(msg.text)
    return command is not None and command.name == "compact"

