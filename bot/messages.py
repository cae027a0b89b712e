"""The normalised nouns that cross the line between channels and the core."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import StrEnum

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (which no UTF-8 store or API accepts) as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


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
    """Who wrote a message. ``as_channel``: a chat spoke, not a user (on Telegram, a message
    sent as a channel or by an anonymous admin): ``id`` is the chat's, and whoever is behind
    it may speak as several such chats (see ``bot.limits.limit_keys``)."""

    id: str
    name: str = ""
    username: str | None = None
    is_bot: bool = False
    as_channel: bool = False


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a message. ``path`` is set once it is saved locally;
    ``data`` carries small inline content (e.g. an image for a vision model).
    ``duration``: seconds of a voice note or audio file, when the platform says;
    ``transcript``: what it says, once transcribed (``bot.media``)."""

    kind: AttachmentKind
    name: str
    mime_type: str | None = None
    size: int | None = None
    path: str | None = None
    data: bytes | None = None
    platform_file_id: str | None = None
    duration: float | None = None
    transcript: str | None = None

    @property
    def audible(self) -> bool:
        """A voice note or an audio file: something to transcribe."""
        return self.kind is AttachmentKind.VOICE or self.kind is AttachmentKind.AUDIO


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


class Purpose(StrEnum):
    """Why a message goes out: an answer to what the person wrote, or one the bot starts (a reminder, a task's)."""

    ANSWER = "answer"
    REMINDER = "reminder"
    TASK = "task"  # a scheduled task's answer, or a notice nobody's message asked for


@dataclass(frozen=True, slots=True)
class Target:
    """Where an answer goes: a chat, the thread in it, and the message it answers; and why (a
    channel may send a reminder otherwise than an answer: WhatsApp's templates)."""

    chat_id: str
    chat_type: ChatType = ChatType.DM
    thread_id: str | None = None
    reply_to: str | None = None  # the triggering message's platform id (groups reply to it)
    purpose: Purpose = Purpose.ANSWER

    @classmethod
    def of(cls, msg: InboundMessage) -> Target:
        return cls(msg.chat_id, msg.chat_type, msg.thread_id, msg.message_id)


@dataclass(frozen=True, slots=True)
class FileRef:
    """A workspace file an answer sends by reference: its bytes are read when the chunk is
    sent, and sent only while the file still has ``size`` bytes with this ``sha256``."""

    workspace: str  # the workspace's folder
    path: str  # relative to it
    size: int
    sha256: str  # hex


@dataclass(frozen=True, slots=True)
class Chunk:
    """One message of an answer, already rendered in the channel's dialect; with
    ``file_name`` it is a file whose caption is ``text``: its bytes are ``file_data``, or
    the workspace file ``file_ref`` read at send time. ``voice``: the file is a voice note
    (Opus), shown as one where the platform can; ``photo``: the file is a picture, shown as a
    photo with its caption where the platform can (``SendsPhoto``), else sent as a file."""

    text: str
    file_name: str | None = None
    file_data: bytes | None = None
    file_ref: FileRef | None = None
    voice: bool = False
    photo: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    """What is owed to a chat: rendered chunks, stored before the first is sent.

    ``inbound_ids`` are answered once the last chunk is delivered. ``draft_id`` is a
    streaming draft the first chunk replaces. ``failed`` marks a failure notice (the chat
    shows the run failed). ``sent`` counts the chunks already delivered (a resumed answer)."""

    id: str
    platform: str
    target: Target
    chunks: tuple[Chunk, ...]
    inbound_ids: tuple[int, ...] = ()
    draft_id: str | None = None
    failed: bool = False
    sent: int = 0
    created_at: float = field(default_factory=time.time)
