"""Discord messages -> the normalised InboundMessage.

``facts_of`` reads what matters off a discord.py ``Message`` into ``Facts`` (plain data);
``to_inbound`` is a pure function of those facts, tested with tables.

Where a message lands:

| Discord                                  | chat_type | chat_id           | thread_id  |
| DM                                       | dm        | the DM channel id | -          |
| guild text / voice / announcement channel| group     | the channel id    | -          |
| thread, or a post in a forum / media     | group     | the parent's id   | thread id  |

so a channel is one session (``...:group:<channel>``) and each thread or forum post is that
key plus ``:thread:<thread>``; answers go to the thread (a thread is a channel on Discord).

Addressed: every DM; in a guild, a user mention of the bot (``<@id>`` / ``<@!id>``), a
reply to one of its messages, or a command (``/stop`` ...). ``@everyone``, ``@here`` and
role mentions do not count. The bot's mention is stripped; other users' mentions become
``@Name``. Attachments are metadata only (the URL is the platform file id). The bot's own
messages, system messages (joins, pins, thread starters ...), messages with nothing to read
(a sticker alone, or text Discord withholds without the Message Content intent: a guild
message that does not mention the bot, a reply to it with the ping turned off) and, unless
``allow_bots``, other bots and webhooks are not inbound messages at all.

A press on a question's button (``press_of``) is an inbound message too: from the presser,
where the question is, replying to it, its text the button's custom id, its id
``int:<interaction id>`` (a gateway RESUME that replays the interaction gives the same id).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.channels import COMMAND_MENU
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender

PLATFORM = "discord"
PRESS_PREFIX = "int:"  # a press's message id is this and its interaction's id
COMMANDS = frozenset(name for name, _ in COMMAND_MENU) | {"stopall", "reset", "start"}
_USER_MENTION = re.compile(r"<@!?(\d+)>")
_THREAD_TYPES = {10, 11, 12}  # news, public and private threads (forum posts are public threads)
_TEXT_TYPES = {0, 2, 5, 13}  # text, voice (its text chat), announcement, stage
_MESSAGE_TYPES = {0, 19}  # default, reply; everything else is a system message


class Where(StrEnum):
    DM = "dm"
    CHANNEL = "channel"
    THREAD = "thread"


@dataclass(frozen=True, slots=True)
class Facts:
    """What ``to_inbound`` needs to know about one Discord message."""

    message_id: str
    channel_id: str
    where: Where | None  # None: a channel kind we do not answer in (or one we could not learn)
    author: Sender
    content: str
    guild_id: str | None = None
    parent_id: str | None = None  # a thread's channel (text, announcement, forum or media)
    webhook: bool = False
    message_type: int = 0
    mentions: tuple[tuple[str, str], ...] = ()  # users mentioned: (id, display name)
    reply_to: str | None = None  # the referenced message's id
    reply_to_author: str | None = None
    attachments: tuple[Attachment, ...] = ()
    timestamp: float = 0.0


def where_of(channel_type: int | None, in_guild: bool) -> Where | None:
    """Discord's channel type (``None`` for a DM we only know by id) -> where the message is."""
    if not in_guild:
        return Where.DM if channel_type in (None, 1) else None  # 3 is a group DM: not a bot's place
    if channel_type in _THREAD_TYPES:
        return Where.THREAD
    if channel_type in _TEXT_TYPES:
        return Where.CHANNEL
    return None


def attachment_kind(content_type: str | None, name: str) -> AttachmentKind:
    mime = (content_type or "").split(";")[0].strip().lower()
    if mime.startswith("image/") or (not mime and re.search(r"\.(png|jpe?g|gif|webp)$", name, re.I)):
        return AttachmentKind.IMAGE
    if mime.startswith("audio/"):
        return AttachmentKind.AUDIO
    if mime.startswith("video/"):
        return AttachmentKind.VIDEO
    return AttachmentKind.DOCUMENT


def addressing(facts: Facts, bot_id: str) -> tuple[bool, str]:
    """(is the bot addressed, the text with its own mention removed and others named)."""
    names = dict(facts.mentions)
    mentioned = bot_id in names or any(m == bot_id for m in _USER_MENTION.findall(facts.content))

    def name(match: re.Match[str]) -> str:
        uid = match.group(1)
        if uid == bot_id:
            return ""
        return f"@{names[uid]}" if uid in names else match.group(0)

    text = _USER_MENTION.sub(name, facts.content)
    if text != facts.content:
        text = re.sub(r"^[\s,:]+", "", re.sub(r"[ \t]{2,}", " ", text))
    text = text.strip()
    head = text[1:].split(maxsplit=1)[0].lower() if text.startswith("/") and len(text) > 1 else ""
    addressed = (facts.where is Where.DM or mentioned or facts.reply_to_author == bot_id
                 or head.partition("@")[0] in COMMANDS)
    return addressed, text


def to_inbound(facts: Facts, bot_id: str, *, allow_bots: bool = False) -> InboundMessage | None:
    """The InboundMessage for ``facts``, or None when it is not one (see the module doc)."""
    if facts.where is None or facts.author.id == bot_id or facts.message_type not in _MESSAGE_TYPES:
        return None
    if (facts.author.is_bot or facts.webhook) and not allow_bots:
        return None
    if not facts.content and not facts.attachments:
        return None  # nothing to read: a sticker, an embed, or text Discord withheld (no content intent)
    addressed, text = addressing(facts, bot_id)
    return _inbound(facts, bot_id, text=text, message_id=facts.message_id, addressed=addressed,
                    reply_to=facts.reply_to)


def _inbound(facts: Facts, bot_id: str, *, text: str, message_id: str, addressed: bool,
             reply_to: str | None) -> InboundMessage:
    """The message where ``facts`` place it: a thread is its parent channel's chat."""
    if facts.where is Where.THREAD:
        chat_id, thread_id = facts.parent_id or facts.channel_id, facts.channel_id
    else:
        chat_id, thread_id = facts.channel_id, None
    return InboundMessage(
        platform=PLATFORM,
        account=bot_id,
        chat_id=chat_id,
        chat_type=ChatType.DM if facts.where is Where.DM else ChatType.GROUP,
        sender=facts.author,
        text=text,
        message_id=message_id,
        addressed=addressed,
        thread_id=thread_id,
        reply_to=reply_to,
        attachments=facts.attachments,
        timestamp=facts.timestamp,
    )


def press_of(facts: Facts, bot_id: str, question_id: str) -> InboundMessage | None:
    """A press on a button of the bot's message ``question_id``: ``facts`` of the interaction, its
    ``content`` the button's custom id. None where the bot does not answer."""
    if facts.where is None:
        return None
    return _inbound(facts, bot_id, text=facts.content, message_id=f"{PRESS_PREFIX}{facts.message_id}",
                    addressed=True, reply_to=question_id)


def facts_of(message: Any, channel: Any | None = None) -> Facts:
    """Read a discord.py ``Message``; ``channel`` is its channel when the cache did not know it
    (a thread fetched over REST)."""
    channel = channel if channel is not None else message.channel
    # A guild the cache does not hold yet leaves message.guild None; the channel still knows it.
    guild = getattr(message, "guild", None) or getattr(channel, "guild", None)
    raw_guild = guild.id if guild is not None else getattr(channel, "guild_id", None)
    guild_id = str(raw_guild) if raw_guild is not None else None
    kind = getattr(getattr(channel, "type", None), "value", None)
    parent = getattr(channel, "parent_id", None)
    author = message.author
    ref = message.reference
    resolved = getattr(ref, "resolved", None) if ref is not None else None
    replied_to = getattr(resolved, "author", None)
    return Facts(
        message_id=str(message.id),
        channel_id=str(channel.id),
        where=where_of(kind, guild_id is not None),
        author=Sender(str(author.id), getattr(author, "display_name", "") or author.name, author.name,
                      bool(author.bot)),
        content=message.content or "",
        guild_id=guild_id,
        parent_id=str(parent) if parent else None,
        webhook=message.webhook_id is not None,
        message_type=message.type.value,
        mentions=tuple((str(u.id), getattr(u, "display_name", "") or u.name) for u in message.mentions),
        reply_to=str(ref.message_id) if ref is not None and ref.message_id else None,
        reply_to_author=str(replied_to.id) if replied_to is not None else None,
        attachments=tuple(attachment_of(a) for a in message.attachments),
        timestamp=message.created_at.timestamp(),
    )


def attachment_of(a: Any) -> Attachment:
    """A discord.py ``Attachment`` as metadata: a voice message (its flag) is a voice note, with
    its length (``duration_secs``)."""
    voice = bool(getattr(a, "is_voice_message", lambda: False)())
    kind = AttachmentKind.VOICE if voice else attachment_kind(a.content_type, a.filename)
    duration = getattr(a, "duration", None)
    return Attachment(kind, a.filename, a.content_type, a.size, platform_file_id=a.url,
                      duration=float(duration) if duration is not None else None)
