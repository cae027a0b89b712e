"""Slack events -> ``InboundMessage``: pure functions, no SDK, no I/O.

The same message can reach us twice under different names (``app_mention`` and
``message`` for one ``ts``) and again as Slack's retries; every copy maps to the same
``InboundMessage`` (message id = the message's ``ts``) so the core's dedupe runs it once.
That is why addressing is read from the text (``<@BOT>``), never from the event type.

A press on a question's button (``press_of``) comes as a ``block_actions`` interaction: the
presser, in the question's channel and thread, replying to the question's ``ts``, its text
the choice's id, its id ``act:<action_ts>`` (Socket Mode sends an unacknowledged envelope
again with the same payload: the same id).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.slack.config import SlackConfig
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender

JSON = Mapping[str, Any]
PLATFORM = "slack"
STOP_BUTTON = "chatgate_stop"  # the action_id of the progress message's Stop button
ASK_BLOCK = "chatgate_ask"  # the block_id of a question's buttons
_KEPT_SUBTYPES = {None, "file_share", "thread_broadcast"}
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^>]*))?>")
_TOKEN = re.compile(r"<([^<>]*)>")
_SPECIAL = {"here": "@here", "channel": "@channel", "everyone": "@everyone"}


@dataclass(frozen=True, slots=True)
class Me:
    """Who the bot is in this workspace (from ``auth.test``)."""

    user_id: str  # U…, what <@…> mentions
    bot_id: str = ""  # B…, what the bot's own messages carry as bot_id
    team_id: str = ""


@dataclass(frozen=True, slots=True)
class Options:
    reply_in_thread: bool = True
    allowed_bots: frozenset[str] = frozenset()  # bot user ids whose messages are not ignored


def chat_type_of(channel_id: str) -> ChatType:
    """D… is a DM with the bot; C… (channels) and G… (private channels, group DMs) are groups."""
    return ChatType.DM if channel_id.startswith("D") else ChatType.GROUP


def mentions(text: str) -> tuple[str, ...]:
    """User ids mentioned as ``<@U…>``, in order, without repeats."""
    return tuple(dict.fromkeys(m.group(1) for m in _MENTION.finditer(text)))


def readable(text: str, me: str, names: Mapping[str, str]) -> str:
    """Slack's wire text -> what the model reads: the bot's own mention removed, other
    mentions as ``@Name``, ``<#C|general>`` as ``#general``, ``<url|label>`` as
    ``label (url)``, ``<!here>`` as ``@here``, and ``&amp; &lt; &gt;`` unescaped."""

    def token(m: re.Match[str]) -> str:
        body = m.group(1)
        target, _, label = body.partition("|")
        if target.startswith("@"):
            uid = target[1:]
            if uid == me:
                return ""
            return "@" + (names.get(uid) or label or uid)
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            word = target[1:].split("^")[0]
            return _SPECIAL.get(word) or label or f"@{word}"
        if label and label != target and target.removeprefix("mailto:") != label:
            return f"{label} ({target})"
        return label or target

    out = _TOKEN.sub(token, text)
    out = re.sub(r"[ \t]{2,}", " ", out).strip()
    return html.unescape(out) if "&" in out else out


def kind_of(mime: str | None) -> AttachmentKind:
    major = (mime or "").split("/")[0]
    return {"image": AttachmentKind.IMAGE, "audio": AttachmentKind.AUDIO,
            "video": AttachmentKind.VIDEO}.get(major, AttachmentKind.DOCUMENT)


def attachments_of(event: JSON) -> tuple[Attachment, ...]:
    """Files as metadata only; the bytes are fetched (with the bot token) only if the message runs.
    An audio clip recorded in Slack (subtype ``slack_audio``) is a voice note."""
    found = []
    for f in event.get("files") or ():
        url = f.get("url_private_download") or f.get("url_private")
        if not url or f.get("mode") in ("tombstone", "hidden_by_limit", "external"):
            continue
        kind = AttachmentKind.VOICE if f.get("subtype") == "slack_audio" else kind_of(f.get("mimetype"))
        millis = f.get("duration_ms")  # audio and video clips recorded in Slack
        found.append(Attachment(kind=kind, name=f.get("name") or f.get("id") or "file",
                                mime_type=f.get("mimetype"), size=f.get("size"), platform_file_id=url,
                                duration=millis / 1000 if isinstance(millis, (int, float)) else None))
    return tuple(found)


def is_ignored(event: JSON, me: Me, options: Options) -> bool:
    """Own messages, edits, deletions, joins and other subtypes, and bots not allowed."""
    if event.get("subtype") not in _KEPT_SUBTYPES or event.get("hidden"):
        return True
    user = event.get("user") or ""
    if user == me.user_id or (me.bot_id and event.get("bot_id") == me.bot_id):
        return True
    if event.get("bot_id") or event.get("bot_profile"):
        return user not in options.allowed_bots
    return not user


def may_be_heard(event: JSON, config: SlackConfig) -> bool:
    """Whether the core's access may let this message through (run it, or keep it as a
    channel's context), as far as the channel's own settings tell: its names are looked up
    (``users.info``, the app's quota) only then. A message in a channel that is not allowed,
    or a DM when DMs are disabled, is still handed to the core, under ids. A DM from someone
    not in ``allow_from`` is looked up: an approval by pairing lives in the core's store."""
    channel = str(event.get("channel") or "")
    if chat_type_of(channel) is ChatType.DM:
        return config.dm_policy != "disabled"
    if config.group_policy == "disabled":
        return False
    return config.group_policy == "open" or config.group(channel) is not None


def thread_of(event: JSON, chat_type: ChatType, addressed: bool, options: Options) -> str | None:
    """The session's thread: the thread's root ts; a top-level channel message that addresses
    the bot opens its own thread (its ts) when replies go in threads."""
    thread_ts = event.get("thread_ts")
    if thread_ts:
        return str(thread_ts)
    if chat_type is ChatType.GROUP and addressed and options.reply_in_thread:
        return str(event["ts"])
    return None


def is_stop_word(text: str) -> bool:
    return text.strip().strip(".!").lower() == "stop"


def to_inbound(event: JSON, me: Me, *, names: Mapping[str, str], participating: bool,
               running: bool = False, options: Options = Options()) -> InboundMessage | None:
    """One ``message`` or ``app_mention`` event -> an InboundMessage, or None when ignored.

    ``participating``: the bot answered in this event's thread recently (follow-ups there are
    addressed); ``running``: a run of this thread's session is live (a bare ``stop`` stops it)."""
    if event.get("type") not in ("message", "app_mention") or is_ignored(event, me, options):
        return None
    channel, raw = str(event.get("channel") or ""), str(event.get("text") or "")
    if not channel or not event.get("ts"):
        return None
    chat_type = chat_type_of(channel)
    in_thread = bool(event.get("thread_ts")) and event.get("thread_ts") != event.get("ts")
    mentioned = me.user_id in mentions(raw)
    addressed = chat_type is ChatType.DM or mentioned or (in_thread and participating)
    text = readable(raw, me.user_id, names)
    if in_thread and (participating or running) and is_stop_word(text):
        text, addressed = "/stop", True
    user = str(event["user"])
    sender = Sender(id=user, name=names.get(user, ""), username=None, is_bot=bool(event.get("bot_id")))
    return InboundMessage(
        platform=PLATFORM, account=me.user_id, chat_id=channel, chat_type=chat_type, sender=sender, text=text,
        message_id=str(event["ts"]), addressed=addressed, thread_id=thread_of(event, chat_type, addressed, options),
        reply_to=None, attachments=attachments_of(event), timestamp=float(event["ts"]))


def command_of(payload: JSON, me: Me, *, name: str, thread_id: str | None, args: str | None = None) -> InboundMessage:
    """A slash command (``/stop``, ``/<prefix>stop`` or ``/chatgate stop``) -> ``/<name> args``,
    addressed; ``args``: the payload's text when None (``commands.route`` gives both).

    Slack runs slash commands outside threads; ``thread_id`` is the thread the channel
    picked for it (the caller's live run there, else none)."""
    channel = str(payload.get("channel_id") or "")
    args = str(payload.get("text") or "").strip() if args is None else args.strip()
    user = str(payload.get("user_id") or "")
    return InboundMessage(
        platform=PLATFORM, account=me.user_id, chat_id=channel, chat_type=chat_type_of(channel),
        sender=Sender(id=user, name=str(payload.get("user_name") or "")),
        text=f"/{name} {args}".strip(), message_id=f"cmd:{payload.get('trigger_id') or ''}",
        addressed=True, thread_id=thread_id)


def stop_button_of(payload: JSON, me: Me) -> InboundMessage | None:
    """A click on the Stop button -> ``/stop`` for the session whose progress message it is."""
    action = next((a for a in payload.get("actions") or () if a.get("action_id") == STOP_BUTTON), None)
    container, user = payload.get("container") or {}, payload.get("user") or {}
    channel = str((payload.get("channel") or {}).get("id") or container.get("channel_id") or "")
    if action is None or not channel:
        return None
    thread = str(action.get("value") or "") or container.get("thread_ts") or None
    return InboundMessage(
        platform=PLATFORM, account=me.user_id, chat_id=channel, chat_type=chat_type_of(channel),
        sender=Sender(id=str(user.get("id") or ""), name=str(user.get("name") or "")),
        text="/stop", message_id=f"action:{action.get('action_ts') or payload.get('trigger_id') or ''}",
        addressed=True, thread_id=thread)


def press_of(payload: JSON, me: Me) -> InboundMessage | None:
    """A click on a question's button -> the press ``Asks`` describes; None for anything else."""
    action = next((a for a in payload.get("actions") or () if a.get("block_id") == ASK_BLOCK), None)
    container, user = payload.get("container") or {}, payload.get("user") or {}
    message = payload.get("message") or {}
    channel = str((payload.get("channel") or {}).get("id") or container.get("channel_id") or "")
    question = str(container.get("message_ts") or message.get("ts") or "")
    choice = str(action.get("value") or action.get("action_id") or "") if action is not None else ""
    if not (channel and question and choice):
        return None
    thread = container.get("thread_ts") or message.get("thread_ts")
    return InboundMessage(
        platform=PLATFORM, account=me.user_id, chat_id=channel, chat_type=chat_type_of(channel),
        sender=Sender(id=str(user.get("id") or ""), name=str(user.get("name") or user.get("username") or "")),
        text=choice, message_id=f"act:{action.get('action_ts') if action else ''}",
        addressed=True, thread_id=str(thread) if thread and thread != question else None, reply_to=question)
