"""Discord's inbound mapping, access scoping, config and slash-command sync as tables (no event loop)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from adapters.discord.commands import in_sync
from adapters.discord.config import DiscordConfig, group_allowed, problems
from adapters.discord.heartbeat import is_zombie
from adapters.discord.inbound import Facts, Where, attachment_kind, to_inbound, where_of
from bot.messages import Attachment, AttachmentKind, ChatType, Sender

BOT = "900"
ALICE = Sender("1", "Alice", "alice")
BASE = Facts("m1", "c1", Where.CHANNEL, ALICE, "hello", guild_id="g1")


def facts(**changes: object) -> Facts:
    return replace(BASE, **changes)


@pytest.mark.parametrize(("case", "given", "addressed", "text"), [
    ("dm is always addressed", facts(where=Where.DM, guild_id=None), True, "hello"),
    ("plain guild message", facts(), False, "hello"),
    ("user mention of the bot, stripped", facts(content=f"<@{BOT}> what is 2+2", mentions=((BOT, "chatgate"),)),
     True, "what is 2+2"),
    ("nickname mention form", facts(content=f"<@!{BOT}>, hi", mentions=((BOT, "chatgate"),)), True, "hi"),
    ("mention in the middle", facts(content=f"hey <@{BOT}> look", mentions=((BOT, "chatgate"),)), True, "hey look"),
    ("@everyone does not address", facts(content="@everyone meeting now"), False, "@everyone meeting now"),
    ("@here does not address", facts(content="@here anyone?"), False, "@here anyone?"),
    ("a role mention does not address", facts(content="<@&900> ping the role"), False, "<@&900> ping the role"),
    ("reply to the bot", facts(content="and then?", reply_to="m0", reply_to_author=BOT), True, "and then?"),
    ("reply to someone else", facts(content="yes", reply_to="m0", reply_to_author="2"), False, "yes"),
    ("a command", facts(content="/stop"), True, "/stop"),
    ("a command with args", facts(content="/new please"), True, "/new please"),
    ("a path is not a command", facts(content="/etc/hosts is odd"), False, "/etc/hosts is odd"),
    ("other users become names", facts(content=f"<@{BOT}> ask <@2> and <@!3>",
                                       mentions=((BOT, "chatgate"), ("2", "Bob"), ("3", "Carol"))),
     True, "ask @Bob and @Carol"),
    ("an unknown mention is left as written", facts(content=f"<@{BOT}> who is <@77>", mentions=((BOT, "c"),)),
     True, "who is <@77>"),
])
def test_addressing_and_text(case: str, given: Facts, addressed: bool, text: str) -> None:
    msg = to_inbound(given, BOT)
    assert msg is not None, case
    assert (msg.addressed, msg.text) == (addressed, text), case


@pytest.mark.parametrize(("case", "given", "chat", "thread", "chat_type"), [
    ("dm: the DM channel", facts(where=Where.DM, guild_id=None, channel_id="d7"), "d7", None, ChatType.DM),
    ("guild channel: a group per channel", facts(channel_id="c9"), "c9", None, ChatType.GROUP),
    ("thread: the parent channel, the thread", facts(where=Where.THREAD, channel_id="t5", parent_id="c9"),
     "c9", "t5", ChatType.GROUP),
    ("forum post: the forum, the post", facts(where=Where.THREAD, channel_id="p3", parent_id="f1"),
     "f1", "p3", ChatType.GROUP),
])
def test_where_a_message_lands(case: str, given: Facts, chat: str, thread: str | None, chat_type: ChatType) -> None:
    msg = to_inbound(given, BOT)
    assert msg is not None
    assert (msg.chat_id, msg.thread_id, msg.chat_type) == (chat, thread, chat_type), case


@pytest.mark.parametrize(("case", "given", "allow_bots", "kept"), [
    ("own message", facts(author=Sender(BOT, "me", is_bot=True)), True, False),
    ("another bot", facts(author=Sender("5", "bot", is_bot=True)), False, False),
    ("another bot, allow_bots", facts(author=Sender("5", "bot", is_bot=True)), True, True),
    ("a webhook", facts(webhook=True), False, False),
    ("a webhook, allow_bots", facts(webhook=True), True, True),
    ("a join message", facts(message_type=7), False, False),
    ("a thread-created notice", facts(message_type=18), False, False),
    ("a reply", facts(message_type=19), False, True),
    ("a channel kind we do not serve", facts(where=None), False, False),
    ("nothing to read (withheld text, a sticker)", facts(content=""), False, False),
    ("a mention and nothing else: the core decides", facts(content=f"<@{BOT}>", mentions=((BOT, "c"),)), False,
     True),
    ("a file without text", facts(content="", attachments=(
        Attachment(AttachmentKind.DOCUMENT, "a.txt", platform_file_id="u"),)), False, True),
])
def test_what_is_not_an_inbound_message(case: str, given: Facts, allow_bots: bool, kept: bool) -> None:
    assert (to_inbound(given, BOT, allow_bots=allow_bots) is not None) is kept, case


def test_everything_else_is_carried() -> None:
    image = Attachment(AttachmentKind.IMAGE, "cat.png", "image/png", 10, platform_file_id="http://x/cat.png")
    msg = to_inbound(facts(reply_to="m0", attachments=(image,), timestamp=12.5), BOT)
    assert msg is not None
    assert (msg.platform, msg.account, msg.message_id, msg.sender, msg.reply_to, msg.attachments, msg.timestamp) \
        == ("discord", BOT, "m1", ALICE, "m0", (image,), 12.5)


@pytest.mark.parametrize(("channel_type", "in_guild", "where"), [
    (None, False, Where.DM), (1, False, Where.DM), (3, False, None),  # a group DM is not a bot's place
    (0, True, Where.CHANNEL), (5, True, Where.CHANNEL), (2, True, Where.CHANNEL),
    (11, True, Where.THREAD), (12, True, Where.THREAD), (10, True, Where.THREAD),
    (15, True, None), (4, True, None), (None, True, None),  # a forum itself, a category, unknown
])
def test_where_of(channel_type: int | None, in_guild: bool, where: Where | None) -> None:
    assert where_of(channel_type, in_guild) is where


@pytest.mark.parametrize(("mime", "name", "kind"), [
    ("image/png", "a.png", AttachmentKind.IMAGE), (None, "photo.JPG", AttachmentKind.IMAGE),
    ("audio/ogg", "voice-message.ogg", AttachmentKind.AUDIO), ("video/mp4", "v.mp4", AttachmentKind.VIDEO),
    ("application/pdf", "a.pdf", AttachmentKind.DOCUMENT), (None, "notes.txt", AttachmentKind.DOCUMENT),
    ("image/webp; charset=binary", "x", AttachmentKind.IMAGE),
])
def test_attachment_kind(mime: str | None, name: str, kind: AttachmentKind) -> None:
    assert attachment_kind(mime, name) is kind


def cfg(**keys: object) -> DiscordConfig:
    return DiscordConfig.model_validate(keys)


@pytest.mark.parametrize(("case", "config", "where", "allowed"), [
    ("nothing listed", cfg(), ("g1", "c1", None), False),
    ("the guild listed", cfg(guilds=["g1"]), ("g1", "c1", None), True),
    ("another guild listed", cfg(guilds=["g2"]), ("g1", "c1", None), False),
    ("the channel listed", cfg(channels=["c1"]), ("g1", "c1", None), True),
    ("a thread of a listed channel", cfg(channels=["c1"]), ("g1", "t1", "c1"), True),
    ("a thread listed by its own id", cfg(channels=["t1"]), ("g1", "t1", "c1"), True),
    ("another channel of that guild", cfg(channels=["c1"]), ("g1", "c2", None), False),
    ("every guild", cfg(guilds=["*"]), ("g9", "c9", None), True),
    ("ids written as numbers", cfg(guilds=[123]), ("123", "c1", None), True),
    ("open", cfg(group_policy="open"), ("g1", "c1", None), True),
    ("disabled beats a listed guild", cfg(group_policy="disabled", guilds=["g1"]), ("g1", "c1", None), False),
])
def test_group_allowed(case: str, config: DiscordConfig, where: tuple[str, str, str | None], allowed: bool) -> None:
    assert group_allowed(config, *where) is allowed, case


def test_config_keys_are_the_contract() -> None:
    keys = {name for name, f in DiscordConfig.model_fields.items() if not f.exclude}
    assert keys == {"enabled", "token", "api_base", "gateway_url", "dm_policy", "allow_from", "group_policy",
                    "guilds", "channels", "require_mention", "owners", "streaming", "allow_bots", "max_download_mb",
                    "shard_count", "shards"}
    config = cfg()
    assert (config.api_base, config.gateway_url, [g.id for g in config.groups]) == (
        "https://discord.com/api/v10", "wss://gateway.discord.gg/", ["*"])
    with pytest.raises(ValidationError, match="Discord user ids are numbers"):
        cfg(allow_from=["alice"])
    with pytest.raises(ValidationError, match="not a Discord key"):
        cfg(groups=["1"])
    with pytest.raises(ValidationError, match="ws://"):
        cfg(gateway_url="http://127.0.0.1:1/gateway")
    with pytest.raises(ValidationError, match="extra"):
        cfg(intents=1)


def test_channel_entries_carry_their_tool_rules_to_the_core() -> None:
    config = cfg(guilds=["g1"], channels=["c1", {"id": 22, "tools": {"deny": ["exec"]}}])
    assert [g.id for g in config.groups] == ["c1", "22", "*"]  # "*": the channel already filtered
    entry = config.group("22")
    assert entry is not None and entry.tools.deny == ("exec",)
    fallback = config.group("c9")
    assert fallback is not None and fallback.id == "*"
    assert group_allowed(config, "g9", "22", None) and not group_allowed(config, "g9", "c9", None)
    assert [g.id for g in cfg(channels=["*"]).groups] == ["*"]


def test_check_names_the_keys() -> None:
    assert problems(cfg(allow_from=["1"], guilds=["2"])) == []
    found = problems(cfg(require_mention=False))
    assert [line.split(":")[0] for line in found] == [
        "channels.discord.allow_from", "channels.discord.guilds", "channels.discord.require_mention"]


LOCAL = [{"name": "stop", "description": "Stop", "type": 1, "options": [], "nsfw": False, "contexts": None}]


@pytest.mark.parametrize(("case", "remote", "same"), [
    ("nothing registered yet", [], False),
    ("as Discord returns it: ids added, defaults left out",
     [{"id": "1", "application_id": "2", "version": "3", "name": "stop", "description": "Stop", "type": 1}], True),
    ("a description changed", [{"name": "stop", "description": "Halt", "type": 1}], False),
    ("an extra command there", [{"name": "stop", "description": "Stop"}, {"name": "old", "description": "x"}],
     False),
])
def test_slash_commands_in_sync(case: str, remote: list[dict[str, object]], same: bool) -> None:
    assert in_sync(LOCAL, remote) is same, case


@pytest.mark.parametrize(("case", "last_send", "last_ack", "now", "zombie"), [
    ("acked, long ago", 10.0, 10.1, 100.0, False),
    ("sent, the ACK not due yet", 10.0, 9.0, 40.0, False),
    ("sent, the next beat due, within the grace", 10.0, 9.0, 52.0, False),
    ("sent, the next beat due and no ACK", 10.0, 9.0, 53.5, True),
])
def test_is_zombie(case: str, last_send: float, last_ack: float, now: float, zombie: bool) -> None:
    assert is_zombie(last_send, last_ack, interval=41.25, now=now, grace=2.0) is zombie, case
