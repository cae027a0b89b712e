"""The normalised nouns that cross the line between adapters and the core."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum


class ChatType(StrEnum):
    DM = "dm"
    GROUP = "group"


class AttachmentKind(StrEnum):
    IMAGE = "image"
    DOCUMENT = "document"
    AUDIO = "audio"
    VOICE = "voice"
    VIDEO = "video"


@dataclass(frozen=True, slots=True)
class Sender:
    id: str
    name: str = ""
    username: str | None = None
    is_bot: bool = False


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a message. ``path`` is set once it is saved locally;
    ``data`` carries small inline content (e.g. an image for a vision model)."""

    kind: AttachmentKind
    name: str
    mime_type: str | None = None
    size: int | None = None
    path: str | None = None
    data: bytes | None = None
    platform_file_id: str | None = None


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One platform event, normalised. ``text`` has the bot's own mention stripped;
    ``addressed`` is true when the bot was mentioned, replied to, or commanded."""

    platform: str
    account: str
    chat_id: str
    chat_type: ChatType
    sender: Sender
    text: str
    message_id: str
    addressed: bool = True
    thread_id: str | None = None
    reply_to: str | None = None
    attachments: tuple[Attachment, ...] = ()
    timestamp: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class OutboundReply:
    """What the gateway asks an adapter to deliver: Markdown, rendered by the adapter.

    ``run_id`` and ``part`` identify the reply for exactly-once delivery."""

    platform: str
    chat_id: str
    text: str
    run_id: str
    part: int = 0
    thread_id: str | None = None
    reply_to: str | None = None
