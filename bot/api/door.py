"""The way into a conversation from outside the chat apps (the API, the web chat): a person's
message admitted (their access, their limits), stored, and run in its session's lane by the
turn runner like any chat's, acting for that person.

``admit`` answers whether the person may send now: None, or an ``ApiError`` (403 when none
of their accounts may use the bot any more, 429 with the seconds until the rate allows one
more, or until the day's budget renews). ``send`` stores the message (store before answer)
and submits it with a ``TaskOrder`` that says whom it acts for: their rights (owner or
not: tool policy and approvals), whom its model calls are charged to (the person's limits and
budgets). ``stop`` is ``/stop``.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.api.people import Person
from bot.api.wire import ApiError
from bot.conversation import Conversation
from bot.messages import Attachment, ChatType, InboundMessage, Sender
from bot.runs import Admission, Pending, TaskOrder

if TYPE_CHECKING:
    from bot.capabilities.spec import Core

FORBIDDEN = "You may not use this assistant any more; ask its owner."


@dataclass(slots=True)
class Sent:
    conversation: Conversation
    inbound_id: int
    ended: asyncio.Future[str]  # completed, silent, failed or stopped, once the turn is stored


class Door:
    def __init__(self, core: Core) -> None:
        self._core = core

    def owner(self, person: Person) -> bool:
        return any(self._core.access.is_owner_of(platform, user) for platform, user in person.accounts)

    async def admit(self, person: Person) -> ApiError | None:
        """May ``person`` send a message now? Takes one from their rate when so."""
        core = self._core
        for platform, user in person.accounts:
            if await core.access.may_use(platform, user, ChatType.DM, user):
                break
        else:
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
        core = self._core
        msg = InboundMessage(conversation.platform, conversation.account, conversation.chat_id, ChatType.DM,
                             Sender(person.name, person.name), text, message_id, attachments=attachments)
        inbound_id = await core.store.record_inbound(msg, conversation)
        if inbound_id is None:
            raise ApiError(409, "this message was sent already", code="duplicate")
        ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        order = TaskOrder(user_id=person.name, owner=self.owner(person), payers=(person.limit_key,),
                          users=(person.name,), ended=ended)
        pending = Pending(msg, inbound_id, conversation=conversation, order=order)
        if core.turns.dispatcher.submit(conversation.session_key, pending) is Admission.REJECTED:
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
