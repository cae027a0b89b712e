"""Telegram updates -> the normalised InboundMessage (pure functions over PTB objects).

Private chats are DMs; groups and supergroups are groups; a forum topic is a thread
(the General topic is not). In a group the bot is addressed by an @mention of its
username, a reply to one of its messages, or a command (``/stop``, ``/stop@thisbot``;
``/stop@otherbot`` is for someone else). The bot's own mention is stripped from the text.
Edited messages, channel posts and service messages are not inbound messages at all.

A press on one of the bot's inline buttons (a callback query) is an inbound message too
(``press_of``): from the presser, in the chat and topic of the question, replying to it,
its text the button's ``callback_data``, its id ``cb:<query id>`` (a redelivered update
gives the same id). Telegram sends a press without its message only for messages sent
inline (no chat): those are not ours.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import timedelta

from telegram import CallbackQuery, Message, MessageEntity, Update

from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender

PLATFORM = "telegram"
PRESS_PREFIX = "cb:"  # a press's message id is this and the callback query's id


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str  # without "@"


def message_of(update: Update) -> Message | None:
    """The message an update carries, if it is one we answer (new messages only)."""
    message = update.message
    if message is None or message.from_user is None:
        return None  # edits, channel posts, callbacks, anonymous admins ...
    if message.text is None and message.caption is None and not (message.photo or message.document or message.voice
                                                                 or message.audio):
        return None  # service messages: joins, pins, topic changes ...
    return message


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """The message's files as metadata (nothing is downloaded here): the largest photo size,
    a document, a voice note (Ogg/Opus) or an audio file, with its length."""
    found: list[Attachment] = []
    if message.photo:
        photo = message.photo[-1]  # the largest size
        found.append(Attachment(AttachmentKind.IMAGE, f"photo-{message.message_id}.jpg", "image/jpeg",
                                photo.file_size, platform_file_id=photo.file_id))
    if message.document:
        d = message.document
        found.append(Attachment(AttachmentKind.DOCUMENT, d.file_name or f"document-{message.message_id}",
                                d.mime_type, d.file_size, platform_file_id=d.file_id))
    if message.voice:
        v = message.voice
        found.append(Attachment(AttachmentKind.VOICE, f"voice-{message.message_id}.ogg", v.mime_type or "audio/ogg",
                                v.file_size, platform_file_id=v.file_id,
                                duration=_seconds(v.to_dict().get("duration"))))
    if message.audio:
        a = message.audio
        found.append(Attachment(AttachmentKind.AUDIO, a.file_name or f"audio-{message.message_id}", a.mime_type,
                                a.file_size, platform_file_id=a.file_id,
                                duration=_seconds(a.to_dict().get("duration"))))
    return tuple(found)


def _seconds(duration: object) -> float | None:
    """The wire's seconds (``to_dict``: PTB 22 warns on the attribute while it moves to timedelta)."""
    if isinstance(duration, timedelta):
        return duration.total_seconds()
    return float(duration) if isinstance(duration, (int, float)) else None


def chat_type_of(message: Message) -> ChatType | None:
    return _chat_type(message.chat.type)


def _chat_type(kind: str) -> ChatType | None:
    if kind == "private":
        return ChatType.DM
    if kind in ("group", "supergroup"):
        return ChatType.GROUP
    return None


def thread_of(message: Message) -> str | None:
    """The forum topic, or None (plain groups, DMs and the General topic)."""
    if message.chat.is_forum and message.is_topic_message and message.message_thread_id:
        return str(message.message_thread_id)
    return None


def addressing(message: Message, bot: BotIdentity) -> tuple[bool, str]:
    """(is the bot addressed, the text with its own mention removed)."""
    text = message.text if message.text is not None else (message.caption or "")
    entities = message.parse_entities() if message.text is not None else message.parse_caption_entities()
    addressed = message.chat.type == "private"
    mention = f"@{bot.username}".lower()
    for entity, value in entities.items():
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            _, _, target = value.partition("@")
            if not target:
                addressed = True
            elif target.lower() == bot.username.lower():
                addressed = True
                text = value.partition("@")[0] + text[len(value):]
            else:
                return False, text  # a command for another bot
        elif entity.type == MessageEntity.MENTION and value.lower() == mention:
            addressed = True
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == bot.id:
            addressed = True
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == bot.id:
        addressed = True
    cleaned = re.sub(rf"(?i)(?<![\w@]){re.escape(mention)}\b[,:]?", "", text)
    if cleaned != text:
        cleaned = re.sub(r"[ \t]{2,}", " ", cleaned)
    return addressed, cleaned.strip()


def to_inbound(message: Message, bot: BotIdentity, attachments: tuple[Attachment, ...] = ()) -> InboundMessage | None:
    chat_type = chat_type_of(message)
    user = message.from_user
    if chat_type is None or user is None:
        return None
    addressed, text = addressing(message, bot)
    reply = message.reply_to_message
    if message.sender_chat is not None:  # an anonymous admin, or a channel speaking in its group: a person, not a bot
        chat = message.sender_chat  # anyone may own many channels: limits count them per group too
        sender = Sender(str(chat.id), chat.title or chat.username or str(chat.id), chat.username, as_channel=True)
    else:
        sender = Sender(str(user.id), user.full_name, user.username, user.is_bot)
    return InboundMessage(
        platform=PLATFORM,
        account=str(bot.id),
        chat_id=str(message.chat.id),
        chat_type=chat_type,
        sender=sender,
        text=text,
        message_id=str(message.message_id),
        addressed=addressed,
        thread_id=thread_of(message),
        reply_to=str(reply.message_id) if reply is not None else None,
        attachments=attachments,
        timestamp=message.date.timestamp(),
    )


def press_of(query: CallbackQuery, bot: BotIdentity) -> InboundMessage | None:
    """A press on a button of the bot's message -> the InboundMessage ``Asks`` describes; None for
    a button of an inline message or one without ``callback_data``. A message older than 48 h
    comes without its content (``InaccessibleMessage``): its forum topic is then unknown."""
    message = query.message
    if message is None or query.data is None:
        return None
    chat_type = _chat_type(message.chat.type)
    if chat_type is None:
        return None
    user = query.from_user
    return InboundMessage(
        platform=PLATFORM,
        account=str(bot.id),
        chat_id=str(message.chat.id),
        chat_type=chat_type,
        sender=Sender(str(user.id), user.full_name, user.username, user.is_bot),
        text=query.data,
        message_id=f"{PRESS_PREFIX}{query.id}",
        addressed=True,
        thread_id=thread_of(message) if isinstance(message, Message) else None,
        reply_to=str(message.message_id),
        timestamp=time.time(),
    )
