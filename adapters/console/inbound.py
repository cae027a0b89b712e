"""A line typed in the terminal as an ``InboundMessage``: a DM from the local user; a line that
is the key of an open question's choice is a press on it (``press_of``)."""

from __future__ import annotations

import uuid

from bot.messages import ChatType, InboundMessage, Sender

PLATFORM = "console"


def to_inbound(user: str, text: str, *, reply_to: str | None = None) -> InboundMessage:
    return InboundMessage(
        platform=PLATFORM,
        account="console",
        chat_id=user,
        chat_type=ChatType.DM,
        sender=Sender(user, user, user),
        text=text,
        message_id=uuid.uuid4().hex,
        reply_to=reply_to,
    )


def press_of(user: str, question_id: str, choice_id: str) -> InboundMessage:
    """The choice ``choice_id`` of the question ``question_id``, typed by its key."""
    return to_inbound(user, choice_id, reply_to=question_id)
