"""The way into a conversation from outside the chat apps (the API, the web chat): a person's
message admitted (their access, their limits), stored, and run in its session's lane by the
turn runner like any chat's, acting for that person.

``admit`` answers whether the person may send now: None, or an ``ApiError`` (403 when none
of their accounts may use the bot any more, 429 with the seconds until the rate allows one
more, or until the day's budget renews). ``send`` stores the message (store before answer)
and submits it with a ``TaskOrder`` that says whom it acts for: their rights (owner or
not: tool policy and approvals), whom its model calls are charged to (the person's limits and
budgets). ``stop`` is ``/stop``.

A message is stored only once the bot runs (``start``, when the capability starts: after the
intake recovered what a previous process left): one stored before would be taken up by that
recovery too, and run twice. A request that comes meanwhile waits.

With several instances (``core.peers``), the turn runs in the session's lane as every turn
does: the instance that took the request first owns the lane (``Peers.own``: it waits while
another instance runs the session), keeps it while it stores the message (so that no other
instance takes the stored message up: its ``TaskOrder``, whom it acts for, lives only here),
and claims that message as its own (``Peers.claim``: the lane's owner never hands it on again).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.api.people import Person
from bot.api.wire import ApiError
from bot.conversation import Conversation
from bot.messages import Attachment, ChatType, InboundMessage, Sender
from bot.runs import Admission, Pending, TaskOrder
from bot.store.base import InboundRecord

if TYPE_CHECKING:
    from bot.capabilities.spec import Core

log = logging.getLogger(__name__)

FORBIDDEN = "You may not use this assistant any more; ask its owner."
ELSEWHERE = "This conversation is busy on another server of this assistant; try again in a moment."


@dataclass(slots=True)
class Sent:
    conversation: Conversation
    inbound_id: int
    ended: asyncio.Future[str]  # completed, silent, failed or stopped, once the turn is stored


class Door:
    def __init__(self, core: Core) -> None:
        self._core = core
        self._started = asyncio.Event()

    def start(self) -> None:
        """The bot runs: messages may be stored and run from now on."""
        self._started.set()

    def owner(self, person: Person) -> bool:
        return any(self._core.access.is_owner_of(platform, user) for platform, user in person.accounts)

    async def may_use(self, person: Person) -> bool:
        """Whether one of ``person``'s accounts may still use the bot (a command needs no more)."""
        for platform, user in person.accounts:
            if await self._core.access.may_use(platform, user, ChatType.DM, user):
                return True
        return False

    async def admit(self, person: Person) -> ApiError | None:
        """May ``person`` send a message now? Takes one from their rate when so."""
        core = self._core
        if not await self.may_use(person):
            return ApiError(403, FORBIDDEN, "permission_error", code="forbidden")
        if self.owner(person) or not core.limits.active:
            return None
        refusal = await core.limits.check(person.limit_key)
        if refusal is None:
            return None
        settings = core.limits.settings
        if refusal.reason == "rate" and settings.messages_per_minute:
            wait = math.ceil(60 / settings.messages_per_minute)
            message = (f"Rate limit reached: at most {settings.messages_per_minute} messages a minute; "
                       f"try again in {wait} s.")
        else:
            wait = _until_midnight()
            message = "Today's budget is used up; it renews at 00:00 UTC."
        return ApiError(429, message, "rate_limit_exceeded" if refusal.reason == "rate" else "insufficient_quota",
                        code="rate_limit_exceeded" if refusal.reason == "rate" else "insufficient_quota",
                        retry_after=wait)

    async def send(self, person: Person, conversation: Conversation, text: str, message_id: str,
                   attachments: tuple[Attachment, ...] = ()) -> Sent | None:
        """Store ``text`` as ``person``'s message in ``conversation`` and run it in its lane; None
        when the session's queue is full (nothing is run; the message is answered)."""
        await self._started.wait()  # never stored before the intake's recovery looked (it would run it too)
        core, key = self._core, conversation.session_key
        msg = InboundMessage(conversation.platform, conversation.account, conversation.chat_id, ChatType.DM,
                             Sender(person.name, person.name), text, message_id, attachments=attachments)
        peers = core.peers
        if peers is not None:  # the session's lane comes here first (it waits while another runs it)
            await peers.own(key)
        with peers.keeping(key) if peers is not None else nullcontext():  # not given back before it runs
            inbound_id = await core.store.record_inbound(msg, conversation)
            if inbound_id is None:
                raise ApiError(409, "this message was sent already", code="duplicate")
            if peers is not None and not await peers.claim(InboundRecord(inbound_id, key, msg, time.time())):
                # the lane went to another instance meanwhile (this one lost its lease): it was told and
                # would run the message without the person's order; it is answered here instead
                log.warning("api: session %s went to another instance; message %s not run", key, inbound_id)
                await core.store.mark_answered((inbound_id,))
                raise ApiError(503, ELSEWHERE, "server_error", code="busy_elsewhere", retry_after=1)
            ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            order = TaskOrder(user_id=person.name, owner=self.owner(person), payers=(person.limit_key,),
                              users=(person.name,), ended=ended)
            pending = Pending(msg, inbound_id, conversation=conversation, order=order)
            if core.turns.dispatcher.submit(key, pending) is Admission.REJECTED:
                await core.store.mark_answered((inbound_id,))
                return None
        return Sent(conversation, inbound_id, ended)

    async def stop(self, conversation: Conversation) -> bool:
        """``/stop`` in ``conversation``: its run cancelled (its turn stored so far), its queue dropped."""
        stopped, _, ids = await self._core.turns.stop(conversation)
        await self._core.store.mark_answered(ids)
        return stopped

    def busy(self, conversation: Conversation) -> bool:
        return self._core.turns.dispatcher.busy(conversation.session_key)


def _until_midnight() -> int:
    now = time.time()
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    return max(1, math.ceil(day + 86400 - now))
