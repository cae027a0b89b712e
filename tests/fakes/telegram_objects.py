"""What the fake Telegram server records, and the shapes of the Telegram objects it makes.

Pure data: the records tests inspect (``Sent``, ``Edit``, ...) and ``build_message``, which
builds a Message the way Telegram delivers a user's message (private, group, forum topic,
channel post, media, service message), with the entities Telegram adds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.telegram_html import detect_entities

JSON = dict[str, Any]
SUPERGROUP_BELOW = -1_000_000_000_000  # supergroup and channel ids are -100xxxxxxxxxx
DEFAULT_GROUP_USER = 1001  # the sender in groups when no user_id is given


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class Call:
    """One API request, recorded on arrival (before any injected failure). The file route
    is recorded as method ``downloadFile``."""

    method: str
    params: JSON
    time: float  # time.monotonic()


@dataclass(frozen=True, slots=True)
class Sent:
    """A message the bot created: sendMessage, sendDocument or sendPhoto (caption as text)."""

    method: str
    chat_id: int | str
    text: str | None  # as the bot sent it, HTML markup included
    plain: str | None  # as the user sees it, after parsing and trimming
    parse_mode: str | None
    reply_to: int | None
    thread_id: int | None
    message_id: int
    time: float
    params: JSON = field(repr=False)  # every parameter, e.g. disable_notification, link_preview_options
    message: JSON = field(repr=False)  # the Message returned; usable as reply_to_message


@dataclass(frozen=True, slots=True)
class Edit:
    """A successful editMessageText (a refused one is only in ``calls``)."""

    chat_id: int | str | None
    message_id: int | None
    text: str
    plain: str
    parse_mode: str | None
    time: float
    inline_message_id: str | None = None
    reply_markup: JSON | None = None  # the keyboard the edit left (None: no buttons any more)


@dataclass(frozen=True, slots=True)
class CallbackAnswer:
    """An answerCallbackQuery Telegram accepted: the press's spinner stopped, ``text`` shown to the presser."""

    query_id: str
    text: str | None
    show_alert: bool
    time: float


@dataclass(frozen=True, slots=True)
class Action:
    chat_id: int | str
    action: str
    thread_id: int | None
    time: float


@dataclass(frozen=True, slots=True)
class Document:
    """A file the bot uploaded (sendDocument, sendPhoto, sendVoice or sendAudio)."""

    method: str
    chat_id: int | str
    filename: str
    data: bytes = field(repr=False)
    mime_type: str | None
    caption: str | None
    file_id: str
    message_id: int
    time: float


@dataclass(frozen=True, slots=True)
class CommandsCall:
    method: str  # setMyCommands, getMyCommands or deleteMyCommands
    commands: tuple[tuple[str, str], ...]  # (command, description); what get returned
    scope: JSON | None
    language_code: str
    time: float


@dataclass(frozen=True, slots=True)
class Failure:
    """An injected answer: an error body, or a dropped connection."""

    status: int
    description: str
    retry_after: int | None = None
    migrate_to_chat_id: int | None = None
    disconnect: bool = False
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Webhook:
    url: str
    secret_token: str | None
    allowed_updates: tuple[str, ...] | None
    max_connections: int


@dataclass(frozen=True, slots=True)
class StoredFile:
    file_id: str
    file_unique_id: str
    file_path: str
    data: bytes = field(repr=False)


# ----------------------------------------------------------------------------- objects


def chat_type_of(chat_id: int) -> str:
    return "private" if chat_id > 0 else "supergroup" if chat_id <= SUPERGROUP_BELOW else "group"


def default_chat(chat_id: int | str, index: int = 0) -> JSON:
    """The Chat of a chat the fake has not seen in an update."""
    if isinstance(chat_id, str):  # "@channelusername"
        return {"id": -1_009_000_000_000 - index, "type": "channel", "title": chat_id,
                "username": chat_id.lstrip("@")}
    if chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": "User"}
    return {"id": chat_id, "type": chat_type_of(chat_id), "title": "Test group"}


def _unique(file_id: str) -> str:
    return "AgAD" + file_id[-8:]


def build_message(chat_id: int, message_id: int, text: str | None = None, *, user_id: int | None = None,
                  first_name: str = "Alice", last_name: str | None = None, username: str | None = None,
                  chat_type: str | None = None, chat_title: str = "Test group", is_forum: bool = False,
                  message_thread_id: int | None = None, is_topic_message: bool = False,
                  entities: list[JSON] | None = None, reply_to_message: JSON | None = None,
                  photo: list[JSON] | None = None, document: JSON | None = None, voice: JSON | None = None,
                  audio: JSON | None = None, caption: str | None = None, media_group_id: str | None = None, edited: bool = False,
                  channel_post: bool = False, new_chat_members: list[JSON] | None = None,
                  from_bot: bool = False, date: int | None = None, anonymous_admin: bool = False,
                  as_channel: int | None = None) -> tuple[str, JSON]:
    """(update field, Message) for a message as Telegram delivers it.

    ``chat_type`` defaults from the id (positive private, ``-100...`` supergroup, other
    negative group; ``channel_post`` a channel). The sender is ``user_id``, else the chat id in
    a private chat and ``DEFAULT_GROUP_USER`` elsewhere. bot_command and mention entities are
    added to ``text`` / ``caption`` unless ``entities`` is given. ``photo``, ``document``,
    ``voice`` and ``audio`` are PhotoSize / Document / Voice / Audio dicts; missing file_unique_id
    and sizes are filled.
    ``as_channel``: a user posting in the group as their channel with this id.
    """
    chat_type = chat_type or ("channel" if channel_post else chat_type_of(chat_id))
    user: JSON = {"id": user_id if user_id is not None else chat_id if chat_type == "private" else DEFAULT_GROUP_USER,
                  "is_bot": from_bot, "first_name": first_name}
    user.update({k: v for k, v in (("last_name", last_name), ("username", username)) if v})
    if not from_bot:
        user["language_code"] = "en"
    if chat_type == "private":
        chat: JSON = {"id": chat_id, "type": "private", "first_name": first_name}
        chat.update({k: v for k, v in (("last_name", last_name), ("username", username)) if v})
    else:
        chat = {"id": chat_id, "type": chat_type, "title": chat_title, **({"is_forum": True} if is_forum else {})}
    msg: JSON = {"message_id": message_id, "date": date or int(time.time()), "chat": chat,
                 **({"sender_chat": chat} if channel_post else {"from": user})}
    if anonymous_admin:  # Telegram's placeholder bot as sender, the group itself as sender_chat
        msg["from"] = {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"}
        msg["sender_chat"] = chat
    if as_channel is not None:  # Telegram's placeholder bot as sender, the channel as sender_chat
        msg["from"] = {"id": 136817688, "is_bot": True, "first_name": "Channel", "username": "Channel_Bot"}
        msg["sender_chat"] = {"id": as_channel, "type": "channel", "title": f"Channel {as_channel}"}
    if message_thread_id is not None:
        msg["message_thread_id"] = message_thread_id
        if is_topic_message or is_forum:
            msg["is_topic_message"] = True
    if reply_to_message is not None:  # Telegram does not nest replies further
        msg["reply_to_message"] = {k: v for k, v in reply_to_message.items() if k != "reply_to_message"}
    if text is not None:
        msg["text"] = text
        msg["entities"] = entities if entities is not None else detect_entities(text)
    if photo is not None:
        msg["photo"] = [{"file_unique_id": _unique(p["file_id"]), "width": 320, "height": 240, **p} for p in photo]
    for key, media in (("document", document), ("voice", voice), ("audio", audio)):
        if media is not None:
            msg[key] = {"file_unique_id": _unique(media["file_id"]), **media}
    if caption is not None:
        msg["caption"] = caption
        msg["caption_entities"] = entities if entities is not None else detect_entities(caption)
    if media_group_id is not None:
        msg["media_group_id"] = media_group_id
    if new_chat_members is not None:
        msg["new_chat_members"] = new_chat_members
    if edited:
        msg["edit_date"] = int(time.time())
    msg = {k: v for k, v in msg.items() if v != []}  # Telegram leaves out empty lists
    return ("edited_" if edited else "") + ("channel_post" if channel_post else "message"), msg


__all__ = ["Action", "Call", "CallbackAnswer", "CommandsCall", "Document", "Edit", "Failure", "JSON", "Sent", "StoredFile", "Webhook",
           "build_message", "chat_type_of", "default_chat"]
