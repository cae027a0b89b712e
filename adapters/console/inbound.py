"""A line typed in the terminal as an ``InboundMessage``: a DM from the local user."""

from __future__ import annotations

import uuid

from bot.messages import ChatType, InboundMessage, Sender

PLATFORM = "console"


def to_inbound(user: str, text: str) -> InboundMessage:
    return InboundMessage(
        platform=PLATFORM,
        account="console",
        chat_id=user,
        chat_type=ChatType.DM,
        sender=Sender(user, user, user),
        text=text,
        message_id=uuid.uuid4().hex,
    )
