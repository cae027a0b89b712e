"""Approvals: a tool call that needs a person waits for their press, bound to its run.

``Approvals`` is a step of the one gate of every tool call (``bot.tools.gate``), after the
pre-tool hooks, whoever makes the call (a run, a sub-agent, the memory flush, a task's
check): ``ApprovalRules`` say whether it needs a person. If so, and no grant covers it for every
person the turn acts for ("Allow for this session": one person, one life of the session,
``tools.approval_session_hours``; "Always allow": one person and the exact call), a call that
nobody can answer for (``unattended``: the flush, a check) is not run; otherwise a card goes to
the chat (buttons where the channel ``Asks``, else text with ``/approve <id>``) and the call, only
that call, waits:

- a press is an inbound message (stored and deduped by the intake like any other) that
  ``press`` turns into a decision. It counts only while the run that asked waits for it,
  and only from an approver (``tools.approvers``: the person the run acts for, when it acts
  for one person only; the owners; named people); anyone else gets a short private answer
  and nothing changes. A press or ``/approve <id>`` counts in the card's chat, and also from
  a DM of another account of the person the run acts for (when it acts for one person and
  ``requester`` approves): a linked account of theirs (``agent.identity_links``), or the
  account an API key names. So a run of the API, whose client cannot press, is answered by its
  person from their chat. In a group only an owner's press allows for the session; anyone
  else's "Allow for this session" counts as "Allow once";
  a press after the run ended, was stopped or timed out gets "expired" and runs nothing;
- ``tools.approval_timeout`` seconds without a decision deny the call;
- ``/stop`` cancels the run, and with it the wait: the card is closed as expired.

The decision is stored before the call runs (the first ending wins, in the store), the
card is edited to say who decided what, and the run's trace gets a span. A denied or timed
out call is refused to the model for the rest of its run. At start-up, cards left pending
by a previous process are closed as expired (their runs are gone).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from bot import observe
from bot.approvals import ledger
from bot.approvals.ledger import ApprovalRecord
from bot.channels import Asks, Channel, Choice, SendFailed, spelling
from bot.conversation import Conversation
from bot.messages import ChatType, InboundMessage, Target
from bot.observe import Signal
from bot.outbound.split import render_chunks
from bot.store.base import Session
from bot.store.schema_steps import StepStore
from bot.tasks import OwnedTasks
from bot.tools.approval import (
    ApprovalRules,
    Decision,
    Outcome,
    call_shape,
    choices_for,
    outcome_text,
    parse_choice,
    question_text,
)
from bot.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from bot.config.schema import ToolsConfig

log = logging.getLogger(__name__)

Owner = Callable[[str, str], bool]  # (platform, user id) -> one of the platform's owners
PersonOf = Callable[[str, str], str | None]  # (platform, user id) -> their linked person, if any

EXPIRED = "This question has expired; nothing was run."
NOT_YOURS = "Only the person who asked (or an owner) can answer this."
REMINDER = ("A question above waits for your answer: use its buttons (or {approve} {id} / {deny} {id}). "
            "Your message is queued.")


@dataclass(frozen=True, slots=True)
class ApprovalSettings:
    rules: ApprovalRules = ApprovalRules()
    timeout: float = 300.0
    approvers: tuple[str, ...] = ("requester", "owners")  # and/or "platform:user_id" entries
    allow_always: bool = False
    session_hours: float = 8.0  # how long an "Allow for this session" lasts (the session's end ends it too)


def approval_settings(tools: ToolsConfig) -> ApprovalSettings:
    """``tools.approval*`` as the approvals take them."""
    return ApprovalSettings(ApprovalRules(tuple(tools.approval.items())), tools.approval_timeout,
                            tuple(tools.approvers), tools.allow_always, tools.approval_session_hours)


class GrantStore(StepStore, Protocol):
    """The approvals' store: its operations (``ledger``: approvals and grants), and the session whose life a
    grant lasts."""

    async def session(self, of: Conversation | str, *, fresh: bool = False) -> Session: ...


@dataclass(slots=True)
class _Waiting:
    record: ApprovalRecord
    target: Target
    arguments: Mapping[str, Any]
    shape: str
    people: tuple[str, ...]  # everyone the call acts for ("platform:user_id"), the requester last
    life: int  # the id of the session's current life: "Allow for this session" lasts as long
    linked: str | None = None  # the conversation's linked person (agent.identity_links)
    requester: str = ""  # the requester's user id as the run knows it (an API key's: "platform:user_id")
    future: asyncio.Future[tuple[Decision, str]] = field(default_factory=lambda: asyncio.get_running_loop()
                                                         .create_future())
    reminded: bool = False


class Elsewhere(Protocol):
    """Other instances (PostgreSQL): the run an approval binds may wait on one of them."""

    async def decide_elsewhere(self, record: ApprovalRecord, decision: str, msg: InboundMessage) -> str | None:
        """Decide on the instance whose run waits for it; its answer (``LookupError`` when no instance runs it)."""
        ...

    async def running_elsewhere(self, session_key: str) -> bool:
        """Another live instance runs this session now."""
        ...


class Approvals:
    def __init__(self, store: GrantStore, channels: Mapping[str, Channel], settings: ApprovalSettings, *,
                 is_owner: Owner, mask: Callable[[str], str] = lambda text: text,
                 clock: Callable[[], float] = time.time, elsewhere: Elsewhere | None = None,
                 person_of: PersonOf = lambda platform, user: None) -> None:
        self._store = store
        self._person_of = person_of
        self._channels = channels
        self.settings = settings
        self._is_owner = is_owner
        self._mask = mask
        self._clock = clock
        self._elsewhere = elsewhere
        self._waiting: dict[str, _Waiting] = {}  # approval id -> the call waiting for it
        self._refused: dict[str, set[str]] = {}  # run id -> tools denied in that run
        self._tasks = OwnedTasks()
        self._closing = False

    # -- the gate's step ------------------------------------------------------------------

    async def permit(self, ctx: ToolContext, tool: Tool, call_id: str, arguments: Mapping[str, Any]) -> str | None:
        if not self.settings.rules.needs(tool.name, is_owner=ctx.sender_is_owner, declared=tool.approval):
            return None
        if tool.name in self._refused.get(ctx.run_id, ()):
            return (f"{tool.name} was denied earlier in this run: do not call it again; go on without it "
                    "or tell the person what you would need.")
        people = tuple(f"{ctx.platform}:{user}" for user in ctx.people)
        shape = call_shape(tool.name, arguments)
        life = (await self._store.session(ctx.conversation.root)).id
        if await self._granted(people, life, tool.name, shape):
            return None
        if ctx.unattended:
            log.warning("%s needs a person's approval and nobody can answer here: not run session=%s run=%s",
                        tool.name, ctx.session_key, ctx.run_id)
            return f"{tool.name} needs a person's approval, and nobody can give it here: it was not run."
        return await self._ask(ctx, tool, call_id, arguments, shape, people, life)

    async def _granted(self, people: tuple[str, ...], life: int, tool: str, shape: str) -> bool:
        """Whether grants cover the call for every person it acts for: a session grant of this
        session's life, given within ``session_hours``, or an "always" grant of the exact call."""
        since = self._clock() - self.settings.session_hours * 3600
        for who in people:
            if await self._store.read(ledger.granted("session", _holder(life, who), tool, "*", since)):
                continue
            if self.settings.allow_always and await self._store.read(ledger.granted("always", who, tool, shape)):
                continue
            return False
        return bool(people)

    async def _ask(self, ctx: ToolContext, tool: Tool, call_id: str, arguments: Mapping[str, Any], shape: str,
                   people: tuple[str, ...], life: int) -> str | None:
        conv = ctx.conversation
        channel = self._channels.get(conv.platform)
        if channel is None:
            return f"{tool.name} needs a person's approval, and this chat cannot ask for it: it was not run."
        session = _session_of(ctx)
        record = ApprovalRecord(secrets.token_hex(5), ctx.run_id, call_id, session, conv.platform, conv.chat_id,
                                conv.chat_type.value, conv.thread_id, tool.name, people[-1] if people else "",
                                asked_at=self._clock())
        target = Target(conv.chat_id, conv.chat_type, conv.thread_id)
        waiting = _Waiting(record, target, arguments, shape, people, life, conv.root.person,
                           ctx.people[-1] if ctx.people else "")
        self._waiting[record.id] = waiting  # before it is stored: a sweep never takes it for a gone run's
        try:
            await self._store.write(ledger.add_approval(record))
        except BaseException:
            del self._waiting[record.id]
            raise
        started = self._clock()
        try:
            if not await self._show(channel, waiting):
                await self._end(waiting, Outcome.EXPIRED, None, None)
                return f"{tool.name} needs a person's approval, and the question could not be shown: it was not run."
            log.info("approval %s asked: %s session=%s run=%s", record.id, tool.name, session, ctx.run_id)
            observe.signal(Signal.APPROVAL_ASKED, platform=conv.platform, name=tool.name)
            try:
                async with asyncio.timeout(self.settings.timeout):
                    decision, by = await waiting.future
            except TimeoutError:
                if await self._end(waiting, Outcome.TIMED_OUT, None, None):
                    self._refuse(ctx.run_id, tool.name)
                    self._trace(ctx, tool.name, started, "timed out")
                    return (f"No one approved {tool.name} within {self.settings.timeout:g} s, so it was denied. "
                            "Do not retry it in this run; tell the person it needs their approval.")
                decision, by = await waiting.future  # a decision stored in the same moment wins
        except asyncio.CancelledError:  # /stop or the run's end: the card says so, in the background
            if not self._closing:  # at shutdown the channels are gone: the next start closes the card
                self._tasks.spawn(self._end(waiting, Outcome.EXPIRED, None, None), f"approval {record.id} expired")
            self._trace(ctx, tool.name, started, "expired: the run was stopped")
            raise
        finally:
            self._waiting.pop(record.id, None)
        self._trace(ctx, tool.name, started, f"{'denied' if decision is Decision.DENY else 'allowed'} "
                                              f"({decision.name.lower()}) by {by}")
        if decision is Decision.DENY:
            self._refuse(ctx.run_id, tool.name)
            return (f"The person denied {tool.name}. Do not call it again in this run; go on without it or "
                    "ask them what they want instead.")
        return None

    # -- presses and typed answers --------------------------------------------------------

    async def press(self, msg: InboundMessage) -> None:
        """A button pressed: a decision for the call waiting for it, if the presser may decide."""
        parsed = parse_choice(msg.text)
        channel = self._channels.get(msg.platform)
        reply = EXPIRED if parsed is None else await self.decide(parsed[0], parsed[1], msg)
        if isinstance(channel, Asks):
            try:
                await channel.answer_press(msg, reply)
            except Exception:  # noqa: BLE001 - the press's own acknowledgement is cosmetic
                log.info("answering a press in %s:%s failed", msg.platform, msg.chat_id, exc_info=True)

    async def decide(self, approval_id: str, decision: Decision, msg: InboundMessage, *,
                     here_only: bool = False) -> str | None:
        """Decide for the approval ``approval_id`` as ``msg``'s sender; None when it was taken,
        else the sentence for them (not theirs to decide, expired). With other instances, one
        whose run waits elsewhere is decided there (unless ``here_only``: asked from there)."""
        waiting = self._waiting.get(approval_id)
        if waiting is None and self._elsewhere is not None and not here_only:
            record = await self._store.read(ledger.approval(approval_id))
            if record is not None and record.outcome == Outcome.PENDING.value:
                try:
                    return await self._elsewhere.decide_elsewhere(record, decision.value, msg)
                except LookupError:
                    log.info("approval %s: no instance runs its session now", approval_id)
        if waiting is None or waiting.future.done():
            return EXPIRED
        if not self._may_decide(waiting, msg):
            log.info("approval %s: %s:%s may not decide", approval_id, msg.platform, msg.sender.id)
            return NOT_YOURS
        if decision is Decision.ALWAYS and not self.settings.allow_always:
            decision = Decision.ONCE
        if (decision is Decision.SESSION and waiting.target.chat_type is ChatType.GROUP
                and not self._is_owner(msg.platform, msg.sender.id)):
            decision = Decision.ONCE  # a group's session: only an owner says so
        by = msg.sender.name or msg.sender.username or msg.sender.id
        outcome = Outcome.DENIED if decision is Decision.DENY else Outcome.ALLOWED
        if not await self._end(waiting, outcome, decision, by):
            return EXPIRED
        now = self._clock()
        record = waiting.record
        by_whom = f"{msg.platform}:{msg.sender.id}"
        for who in waiting.people:  # each person the call was asked for, no one else
            if decision is Decision.SESSION:
                await self._store.write(ledger.grant("session", _holder(waiting.life, who), record.tool, "*", by_whom,
                                                     now))
            elif decision is Decision.ALWAYS:
                await self._store.write(ledger.grant("always", who, record.tool, waiting.shape, by_whom, now))
        if not waiting.future.done():
            waiting.future.set_result((decision, by))
        return None

    def _may_decide(self, waiting: _Waiting, msg: InboundMessage) -> bool:
        record = waiting.record
        if msg.platform != record.platform or msg.chat_id != record.chat_id:
            return self._theirs_elsewhere(waiting, msg)
        who = f"{msg.platform}:{msg.sender.id}"
        for entry in self.settings.approvers:
            # the requester decides for themselves only: a call of several people's turn needs someone else
            if entry == "requester" and waiting.people == (who,):
                return True
            if entry == "owners" and self._is_owner(msg.platform, msg.sender.id):
                return True
            if entry == who:
                return True
        return False

    def _theirs_elsewhere(self, waiting: _Waiting, msg: InboundMessage) -> bool:
        """``msg`` is the requester's own, from a DM of another account of theirs: the run acts for
        them alone, and the sender is their linked person, or the account their API key names."""
        if "requester" not in self.settings.approvers or len(waiting.people) != 1 or msg.chat_type is not ChatType.DM:
            return False
        if waiting.linked is not None:
            return self._person_of(msg.platform, msg.sender.id) == waiting.linked
        return bool(waiting.requester) and f"{msg.platform}:{msg.sender.id}" == waiting.requester

    # -- what the intake asks ----------------------------------------------------------

    async def pending(self) -> list[ApprovalRecord]:
        """The stored approvals not ended yet, oldest first (every instance's)."""
        return await self._store.read(ledger.pending_approvals())

    def pending_in(self, session_key: str) -> list[ApprovalRecord]:
        return [w.record for w in self._waiting.values() if w.record.session_key == session_key]

    def remind(self, session_key: str, spell: Callable[[str], str] = lambda name: f"/{name}") -> str | None:
        """The reminder owed to a message that arrives while a card of its session waits: once per card."""
        for waiting in self._waiting.values():
            if waiting.record.session_key == session_key and not waiting.reminded:
                waiting.reminded = True
                return REMINDER.format(approve=spell("approve"), deny=spell("deny"), id=waiting.record.id)
        return None

    def status_line(self, session_key: str) -> str:
        pending = self.pending_in(session_key)
        if not pending:
            return ""
        return "Waiting for approval: " + ", ".join(f"{r.tool} ({r.id})" for r in pending)

    async def recover(self) -> None:
        """Cards whose run is gone are closed as expired: at start-up, those a previous process
        left pending; with several instances also after every sweep, those of an instance that
        died (no live instance holds their session's lane: its run is not waiting any more)."""
        for record in await self.pending():
            if record.id in self._waiting:
                continue
            if self._elsewhere is not None and await self._elsewhere.running_elsewhere(record.session_key):
                continue  # its run waits on another instance
            if not await self._store.write(ledger.settle_approval(record.id, Outcome.EXPIRED.value, None, None,
                                                                  self._clock())):
                continue  # decided, or expired by another instance, meanwhile
            channel = self._channels.get(record.platform)
            if channel is not None and record.question_id is not None:
                target = Target(record.chat_id, ChatType(record.chat_type), record.thread_id)
                await self._close(channel, target, record, outcome_text(record.tool, Outcome.EXPIRED, None, "", 0))
            log.info("approval %s expired (its run is gone)", record.id)

    def closing(self) -> None:
        """Shutdown begins (before the runs are cancelled): cards still waiting stay pending in the
        store, and the next start closes them as expired (the channels are stopping now)."""
        self._closing = True

    async def aclose(self) -> None:
        await self._tasks.stop(grace=2.0)

    # -- the card ------------------------------------------------------------------------

    async def _show(self, channel: Channel, waiting: _Waiting) -> bool:
        record = waiting.record
        buttons = isinstance(channel, Asks)
        spell = spelling(channel)
        group = waiting.target.chat_type is ChatType.GROUP
        text = question_text(record.tool, waiting.arguments, record.id, self._mask, buttons=buttons,
                             allow_always=self.settings.allow_always, spell=spell, group=group)
        try:
            if isinstance(channel, Asks):
                choices = [Choice(i, label, key) for i, label, key in
                           choices_for(record.id, allow_always=self.settings.allow_always, group=group)]
                question_id = await channel.ask(waiting.target, _rendered(channel, text), choices)
            else:
                question_id = await channel.send(waiting.target, _rendered(channel, text))
        except (SendFailed, OSError, ValueError) as exc:
            log.warning("approval %s: the question could not be shown in %s:%s: %s", record.id, record.platform,
                        record.chat_id, exc)
            return False
        waiting.record = record = replace(record, question_id=question_id, buttons=buttons)
        await self._store.write(ledger.approval_shown(record.id, question_id, buttons))
        return True

    async def _end(self, waiting: _Waiting, outcome: Outcome, decision: Decision | None, by: str | None) -> bool:
        """Store the ending (the first wins), then edit the card; False when it had ended already."""
        record = waiting.record
        now = self._clock()
        if not await self._store.write(ledger.settle_approval(record.id, outcome.value,
                                                              decision.value if decision else None, by, now)):
            return False
        observe.signal(Signal.APPROVAL_ANSWERED, platform=record.platform, name=record.tool, reason=outcome.value)
        channel = self._channels.get(record.platform)
        if channel is not None and record.question_id is not None:
            text = outcome_text(record.tool, outcome, decision, by or "", now - record.asked_at)
            self._tasks.spawn(self._close(channel, waiting.target, record, text), f"approval {record.id} card")
        return True

    async def _close(self, channel: Channel, target: Target, record: ApprovalRecord, text: str) -> None:
        assert record.question_id is not None
        try:
            if isinstance(channel, Asks) and record.buttons:
                await channel.close_question(target, record.question_id, _rendered(channel, text))
            else:
                await channel.edit(target, record.question_id, _rendered(channel, text))
        except (SendFailed, OSError) as exc:
            log.info("approval %s: the card could not be updated: %s", record.id, exc)

    # -- plumbing ------------------------------------------------------------------------

    def _refuse(self, run_id: str, tool: str) -> None:
        self._refused.setdefault(run_id, set()).add(tool)
        while len(self._refused) > 1024:  # runs long over: forget the oldest
            del self._refused[next(iter(self._refused))]

    def _trace(self, ctx: ToolContext, tool: str, started: float, outcome: str) -> None:
        if ctx.on_approval is not None:
            ctx.on_approval(tool, started, outcome)


def _holder(life: int, who: str) -> str:
    """Who holds a session grant: one life of the session (its id until /new) and one person."""
    return f"{life}:{who}"


def _session_of(ctx: ToolContext) -> str:
    """The chat's session: a sub-agent's calls are granted and shown in its parent's."""
    return ctx.conversation.root.session_key


def _rendered(channel: Channel, markdown: str) -> str:
    chunks = render_chunks(markdown, channel.dialect, channel.shape)
    return chunks[0] if chunks else markdown


