"""The Discord channel with the real discord.py against the fake Discord (REST + gateway)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.discord.channel import TOKEN_REFUSED, DiscordChannel
from adapters.discord.config import DiscordConfig
from bot.agent.events import EventKind, RunEvent
from bot.channels import COMMAND_MENU, Backoff, SendFailed, Status, Target
from bot.conversation import Conversation
from bot.errors import ChannelError
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage
from bot.outbound.progress import Progress
from tests.fakes.channel import RecordingInbox as Inbox
from tests.fakes.discord_server import MESSAGE_CONTENT, FakeDiscord

USER, OTHER = 4242, 4343
PING_NOBODY = {"parse": [], "replied_user": True}


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


def config(dc: FakeDiscord, **keys: Any) -> DiscordConfig:
    return DiscordConfig.model_validate({"enabled": True, "token": dc.token, "api_base": dc.api_base,
                                         "gateway_url": dc.gateway_url, **keys})


@asynccontextmanager
async def running(dc: FakeDiscord, keys: dict[str, Any] | None = None, **options: Any
                  ) -> AsyncIterator[tuple[DiscordChannel, Inbox]]:
    channel = DiscordChannel(config(dc, **(keys or {})), **options)
    inbox = Inbox()
    await asyncio.wait_for(channel.start(inbox), 10)
    try:
        yield channel, inbox
    finally:
        await channel.stop()


def mention(dc: FakeDiscord, channel: int, text: str, user: int = USER) -> dict[str, Any]:
    return dc.say(channel, user, f"<@{dc.bot_id}> {text}", mentions=[dc.bot_id])


async def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (result := check()):
            await asyncio.sleep(0.02)
    return result


# ----------------------------------------------------------------------------- inbound


async def test_dm_arrives_and_the_answer_pings_nobody(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, inbox):
        dc.dm(USER, "hello there")
        [msg] = await inbox.wait(1)
        assert (msg.platform, msg.chat_type, msg.sender.id, msg.text, msg.addressed) == (
            "discord", ChatType.DM, str(USER), "hello there", True)
        assert msg.chat_id == str(dc.dm_channel(USER)) and msg.account == str(dc.bot_id)
        sent_id = await channel.send(Target.of(msg), "hi @everyone and <@4343>")
        [sent] = dc.sent
        assert sent_id == str(sent.message_id) and sent.channel_id == dc.dm_channel(USER)
        assert sent.payload["allowed_mentions"] == PING_NOBODY
        assert "message_reference" not in sent.payload  # a DM answer is not a reply


async def test_mention_in_a_channel_is_addressed_and_answered_as_a_reply(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    general = guild.channel("general")
    async with running(dc, {"guilds": [guild.id]}) as (channel, inbox):
        trigger = dc.say(general, USER, f"<@{dc.bot_id}> what about <@{OTHER}>?", mentions=[dc.bot_id, OTHER],
                         name="alice")
        [msg] = await inbox.wait(1)
        assert (msg.chat_type, msg.chat_id, msg.thread_id, msg.addressed, msg.text) == (
            ChatType.GROUP, str(general), None, True, f"what about @User{OTHER}?")
        await channel.send(Target.of(msg), "first chunk <@&1> @here")
        await channel.send(Target(msg.chat_id, ChatType.GROUP), "second chunk")
        first, second = dc.sent
        assert first.payload["message_reference"]["message_id"] == int(trigger["id"])
        assert first.payload["message_reference"]["fail_if_not_exists"] is False
        assert "message_reference" not in second.payload
        assert all(s.payload["allowed_mentions"] == PING_NOBODY for s in dc.sent)


async def test_without_the_content_intent_only_messages_for_the_bot_arrive(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    general = guild.channel("general")
    async with running(dc, {"guilds": [guild.id]}) as (channel, inbox):
        mine = await channel.send(Target(str(general), ChatType.GROUP), "I said something")
        dc.say(general, USER, "just chatting")
        dc.say(general, USER, "@everyone lunch!", mention_everyone=True)
        dc.say(general, USER, "<@&77> role ping", mention_roles=[77])
        dc.say(general, USER, "a reply with the ping off", reply_to=int(mine), ping=False)
        dc.say(general, USER, "a reply that pings", reply_to=int(mine))
        mention(dc, general, "and a mention")
        msgs = await inbox.wait(2)
        await asyncio.sleep(0.2)
        # Discord withholds the text of the others: they carry nothing to read, so nothing arrives.
        assert [(m.addressed, m.text) for m in inbox.messages] == [
            (True, "a reply that pings"), (True, "and a mention")]
        assert msgs[0].reply_to == mine
        assert dc.identifies[0]["intents"] & MESSAGE_CONTENT == 0


async def test_ambient_messages_keep_their_text_with_the_content_intent(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    async with running(dc, {"guilds": [guild.id], "require_mention": False}) as (_, inbox):
        general = guild.channel("general")
        dc.say(general, USER, "@everyone lunch!", mention_everyone=True)
        dc.say(general, USER, "<@&77> role ping", mention_roles=[77])
        msgs = await inbox.wait(2)
        assert [(m.addressed, m.text) for m in msgs] == [(False, "@everyone lunch!"), (False, "<@&77> role ping")]
        assert dc.identifies[0]["intents"] & MESSAGE_CONTENT


async def test_guilds_and_channels_not_allowed_reach_nothing(dc: FakeDiscord) -> None:
    allowed = dc.add_guild("A", channels={"general": 0, "other": 0})
    stranger = dc.add_guild("B", channels={"general": 0})
    async with running(dc, {"channels": [allowed.channel("general")]}) as (_, inbox):
        dc.say(stranger.channel("general"), USER, f"<@{dc.bot_id}> hi", mentions=[dc.bot_id])
        dc.say(allowed.channel("other"), USER, f"<@{dc.bot_id}> hi", mentions=[dc.bot_id])
        dc.say(allowed.channel("general"), USER, f"<@{dc.bot_id}> only me", mentions=[dc.bot_id])
        [msg] = await inbox.wait(1)
        await asyncio.sleep(0.2)
        assert len(inbox.messages) == 1 and msg.text == "only me"


async def test_threads_and_forum_posts_are_thread_sessions(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0, "help": 15}, threads={"old": "general", "post": "help"})
    async with running(dc, {"guilds": [guild.id]}) as (channel, inbox):
        new = dc.add_thread(guild, "new", "general")
        unannounced = dc.add_thread(guild, "quiet", "general", announce=False)
        await asyncio.sleep(0.1)
        for name in ("old", "post"):
            dc.say(guild.channel(name), USER, f"<@{dc.bot_id}> {name}", mentions=[dc.bot_id])
        dc.say(new, USER, f"<@{dc.bot_id}> new", mentions=[dc.bot_id])
        dc.say(unannounced, USER, f"<@{dc.bot_id}> quiet", mentions=[dc.bot_id])
        msgs = {m.text: m for m in await inbox.wait(4)}
        assert {t: (m.chat_id, m.thread_id) for t, m in msgs.items()} == {
            "old": (str(guild.channel("general")), str(guild.channel("old"))),
            "post": (str(guild.channel("help")), str(guild.channel("post"))),
            "new": (str(guild.channel("general")), str(new)),
            "quiet": (str(guild.channel("general")), str(unannounced)),
        }
        assert ("GET", f"/channels/{unannounced}") in dc.requests  # the thread the cache missed
        await channel.send(Target.of(msgs["old"]), "in the thread")
        [sent] = dc.sent
        assert sent.channel_id == guild.channel("old")  # answers stay in the thread
        assert sent.payload["message_reference"]["message_id"] == int(msgs["old"].message_id)


async def test_a_guild_the_cache_lacks_is_still_a_guild(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0}, threads={"t": "general"}, announce=False)
    async with running(dc, {"guilds": [guild.id]}) as (_, inbox):
        dc.say(guild.channel("general"), USER, f"<@{dc.bot_id}> hi", mentions=[dc.bot_id])
        dc.say(guild.channel("t"), USER, f"<@{dc.bot_id}> in a thread", mentions=[dc.bot_id])
        first, second = await inbox.wait(2)
        assert (first.chat_type, first.chat_id, first.thread_id) == (
            ChatType.GROUP, str(guild.channel("general")), None)  # never mistaken for a DM
        assert (second.chat_type, second.chat_id, second.thread_id) == (
            ChatType.GROUP, str(guild.channel("general")), str(guild.channel("t")))
    other = dc.add_guild("elsewhere", channels={"general": 0}, announce=False)
    async with running(dc, {"guilds": [guild.id]}) as (_, inbox):
        dc.say(other.channel("general"), USER, f"<@{dc.bot_id}> hi", mentions=[dc.bot_id])
        dc.dm(USER, "dm")
        [msg] = await inbox.wait(1)
        await asyncio.sleep(0.1)
        assert [m.text for m in inbox.messages] == ["dm"]  # a guild not allowed stays out


async def test_replies_to_the_bot_are_addressed(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    general = guild.channel("general")
    async with running(dc, {"guilds": [guild.id], "require_mention": False}) as (channel, inbox):
        mine = await channel.send(Target(str(general), ChatType.GROUP), "I said something")
        dc.say(general, USER, "and why?", reply_to=int(mine))
        dc.say(general, USER, "unrelated", reply_to=int(dc.say(general, OTHER, "x")["id"]))
        msgs = await inbox.wait(3)
        by_text = {m.text: m for m in msgs}
        assert by_text["and why?"].addressed and by_text["and why?"].reply_to == mine
        assert not by_text["unrelated"].addressed


async def test_bots_and_webhooks_are_ignored_unless_allowed(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    general = guild.channel("general")
    for allow, expected in ((False, ["human"]), (True, ["bot", "hook", "human"])):
        async with running(dc, {"guilds": [guild.id], "allow_bots": allow}) as (_, inbox):
            dc.say(general, 7, f"<@{dc.bot_id}> bot", mentions=[dc.bot_id], bot=True)
            dc.say(general, 8, f"<@{dc.bot_id}> hook", mentions=[dc.bot_id], webhook=True)
            dc.say(general, USER, f"<@{dc.bot_id}> human", mentions=[dc.bot_id])
            await inbox.wait(len(expected))
            await asyncio.sleep(0.1)
            assert [m.text for m in inbox.messages] == expected


async def test_attachments_are_metadata_fetched_on_demand_and_capped(dc: FakeDiscord) -> None:
    photo, doc = b"\x89PNG" + b"x" * 500, b"%PDF" + b"y" * 5000
    async with running(dc) as (channel, inbox):
        dc.dm(USER, "look", attachments=[dc.attachment("cat.png", photo, "image/png"),
                                         dc.attachment("spec.pdf", doc, "application/pdf", size=100)])
        [msg] = await inbox.wait(1)
        image, pdf = msg.attachments
        assert (image.kind, image.name, image.mime_type, image.size, image.data) == (
            AttachmentKind.IMAGE, "cat.png", "image/png", len(photo), None)
        assert not any(path.startswith("/attachments") for _, path in dc.requests)  # nothing downloaded yet
        assert await channel.fetch(image, 10_000) == photo
        with pytest.raises(SendFailed) as too_big:
            await channel.fetch(image, 100)  # refused on its size, before downloading
        assert too_big.value.permanent
        with pytest.raises(SendFailed) as lied:
            await channel.fetch(pdf, 1000)  # its size said 100: the download itself is capped
        assert lied.value.permanent
        gone = Attachment(AttachmentKind.DOCUMENT, "x", platform_file_id=f"{dc.root}/attachments/none/x")
        with pytest.raises(SendFailed):
            await channel.fetch(gone, 1000)


async def test_stop_lets_a_message_being_stored_finish(dc: FakeDiscord) -> None:
    release = asyncio.Event()
    stored: list[str] = []

    async def slow_inbox(msg: InboundMessage) -> None:
        await release.wait()
        stored.append(msg.text)

    channel = DiscordChannel(config(dc))
    await asyncio.wait_for(channel.start(slow_inbox), 10)
    dc.dm(USER, "in the middle of a shutdown")
    await eventually(lambda: channel._life.tasks)  # noqa: SLF001 - the event is with the inbox now
    stopping = asyncio.create_task(channel.stop())
    await asyncio.sleep(0.2)
    assert not stopping.done()
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert stored == ["in the middle of a shutdown"]


# ---------------------------------------------------------------------------- outbound


async def test_send_errors_map_to_send_failed(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, inbox):
        dc.dm(USER, "hi")
        [msg] = await inbox.wait(1)
        to = Target.of(msg)
        with pytest.raises(SendFailed) as too_long:
            await channel.send(to, "x" * 2001)
        assert too_long.value.permanent and "50035" in str(too_long.value)
        dc.fail_next("POST messages", 429, retry_after=0.3)  # discord.py waits this out itself
        await channel.send(to, "after a short 429")
        assert [s.content for s in dc.sent] == ["after a short 429"]
        assert dc.requests.count(("POST", f"/channels/{to.chat_id}/messages")) == 3
        dc.fail_next("POST messages", 429, retry_after=120)  # too long to wait inside one attempt
        with pytest.raises(SendFailed) as limited:
            await channel.send(to, "later")
        assert not limited.value.permanent and limited.value.retry_after == 120
        dc.fail_next("POST messages", 429, retry_after=0.1, via=False)  # Cloudflare's, not Discord's
        with pytest.raises(SendFailed) as edge:
            await channel.send(to, "edge")
        assert not edge.value.permanent and edge.value.retry_after
        dc.fail_next("POST messages", 403, code=50007, message="Cannot send messages to this user")
        with pytest.raises(SendFailed) as blocked:
            await channel.send(to, "blocked")
        assert blocked.value.permanent
        with pytest.raises(SendFailed) as unknown:
            await channel.send(Target("123"), "nowhere")
        assert unknown.value.permanent


async def test_edit_and_file_ping_nobody(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    async with running(dc, {"guilds": [guild.id]}) as (channel, inbox):
        dc.say(guild.channel("general"), USER, f"<@{dc.bot_id}> long one", mentions=[dc.bot_id])
        [msg] = await inbox.wait(1)
        draft = await channel.send(Target.of(msg), "draft…")
        await channel.edit(Target.of(msg), draft, "final @everyone")
        [edit] = dc.edits
        assert (edit.message_id, edit.content, edit.payload["allowed_mentions"]) == (
            int(draft), "final @everyone", PING_NOBODY)
        with pytest.raises(SendFailed) as too_long:
            await channel.edit(Target.of(msg), draft, "y" * 2001)
        assert too_long.value.permanent
        file_id = await channel.send_file(Target.of(msg), "answer.md", b"# long\n", "The answer is long <@1>")
        sent = dc.sent[-1]
        assert (str(sent.message_id), sent.content, sent.files) == (
            file_id, "The answer is long <@1>", (("answer.md", b"# long\n"),))
        assert sent.payload["allowed_mentions"] == PING_NOBODY
        assert sent.payload["message_reference"]["message_id"] == int(msg.message_id)


async def test_a_streamed_draft_pings_nobody(dc: FakeDiscord) -> None:
    """The core's draft (streaming: edit) goes through send and edit: neither can ping."""
    guild = dc.add_guild(channels={"general": 0})
    async with running(dc, {"guilds": [guild.id], "streaming": "edit"}) as (channel, inbox):
        mention(dc, guild.channel("general"), "ping them")
        [msg] = await inbox.wait(1)
        async with Progress(channel, Target.of(msg), "edit") as progress:
            progress.feed(RunEvent(EventKind.DELTA, "r1", Conversation.of_key("agent:main:discord:dm:1"), text="Hey @everyone, "))
            await eventually(lambda: dc.sent)
            progress.feed(RunEvent(EventKind.DELTA, "r1", Conversation.of_key("agent:main:discord:dm:1"), text=f"@here: ask <@{OTHER}> or <@&77>."))
            await eventually(lambda: dc.edits)
        [draft], [edit] = dc.sent, dc.edits
        assert edit.message_id == draft.message_id and edit.content.endswith(f"ask <@{OTHER}> or <@&77>.")
        for sent in (draft, edit):
            assert sent.payload["allowed_mentions"] == PING_NOBODY
            assert "@everyone" not in sent.content and "@here" not in sent.content  # the dialect defuses them too


async def test_typing_while_working_and_nothing_after(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0}, threads={"t": "general"})
    async with running(dc, {"guilds": [guild.id]}) as (channel, inbox):
        assert channel.shape.status_every == 8.0 and channel.shape.chunk == 2000
        dc.say(guild.channel("t"), USER, f"<@{dc.bot_id}> go", mentions=[dc.bot_id])
        [msg] = await inbox.wait(1)
        to = Target.of(msg)
        await channel.status(to, Status.WORKING)
        await channel.status(to, Status.WORKING)
        assert [cid for cid, _ in dc.typing] == [guild.channel("t")] * 2  # typing shows in the thread
        for ending in (Status.DONE, Status.FAILED, Status.SILENT):
            await channel.status(to, ending)
        assert len(dc.typing) == 2 and not dc.sent  # an ending sends nothing (typing lapses on its own)
        dc.fail_next("POST typing", 403, code=50013, message="Missing Permissions")
        await channel.status(to, Status.WORKING)  # a failed typing is not an error
        await channel.status(Target("999"), Status.WORKING)


# ------------------------------------------------------------------------- connection


async def test_refused_token_is_one_line_naming_the_key(dc: FakeDiscord) -> None:
    channel = DiscordChannel(config(dc, token="wrong"))
    with pytest.raises(ChannelError) as refused:
        await channel.start(Inbox())
    assert str(refused.value) == TOKEN_REFUSED and str(refused.value).startswith("channels.discord.token:")
    await channel.stop()


async def test_refused_content_intent_is_one_line_then_dms_and_mentions_go_on(
        dc: FakeDiscord, caplog: pytest.LogCaptureFixture) -> None:
    dc.refuse_intents = MESSAGE_CONTENT
    guild = dc.add_guild(channels={"general": 0})
    with caplog.at_level(logging.INFO):
        async with running(dc, {"guilds": [guild.id], "require_mention": False}, backoff=Backoff(0.05, 2.0, 0.1)) as (ch, inbox):
            dc.say(guild.channel("general"), USER, f"<@{dc.bot_id}> still here?", mentions=[dc.bot_id])
            dc.dm(USER, "and DMs?")
            msgs = await inbox.wait(2)
            assert [m.text for m in msgs] == ["still here?", "and DMs?"]
            assert not ch.content_intent
    lines = [r.getMessage() for r in caplog.records if "Message Content" in r.getMessage()]
    assert len(lines) == 1 and "Privileged Gateway Intents" in lines[0]
    assert [i["intents"] & MESSAGE_CONTENT for i in dc.identifies] == [MESSAGE_CONTENT, 0]


async def test_dropped_gateway_resumes_and_missed_events_arrive_once(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, inbox):
        dc.dm(USER, "before")
        await inbox.wait(1)
        dc.drop()
        dc.dm(USER, "while away")  # kept by the session, replayed on RESUME
        await dc.wait_connected(2)
        dc.dm(USER, "after")
        msgs = await inbox.wait(3)
        await asyncio.sleep(0.2)
        assert [m.text for m in inbox.messages] == ["before", "while away", "after"]
        assert len(dc.identifies) == 1 and len(dc.resumes) == 1
        assert dc.compressed == dc.connections == 2  # zlib-stream, as discord.py asks for it
        await channel.send(Target.of(msgs[2]), "answered")  # REST never depended on the socket
        assert [s.content for s in dc.sent] == ["answered"]


async def test_silent_gateway_is_noticed_and_reestablished(dc: FakeDiscord) -> None:
    dc.heartbeat_ms = 200
    async with running(dc, heartbeat_timeout=1.0) as (channel, inbox):
        dc.dm(USER, "one")
        [first] = await inbox.wait(1)
        connections = dc.connections
        dc.silence()  # open, but no ACK and no event from now on
        await channel.send(Target.of(first), "an answer in flight")  # REST goes on meanwhile
        dc.dm(USER, "two")
        await dc.wait_for(lambda: dc.connections > connections and dc.live, timeout=10)
        msgs = await inbox.wait(2)
        assert [m.text for m in msgs] == ["one", "two"]
        dc.dm(USER, "three")
        await inbox.wait(3)
        assert len(dc.resumes) >= 1
        assert [s.content for s in dc.sent] == ["an answer in flight"] and len(inbox.messages) == 3


async def test_a_zombie_connection_is_noticed_by_discord_s_rule(dc: FakeDiscord,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    dc.heartbeat_ms = 300  # discord.py's own 60 s heartbeat_timeout stays as it is
    with caplog.at_level(logging.WARNING, logger="adapters.discord.heartbeat"):
        async with running(dc) as (_, inbox):
            dc.dm(USER, "one")
            await inbox.wait(1)
            dc.silence()  # heartbeats go unanswered
            dc.dm(USER, "two")  # replayed on the resume
            await dc.wait_for(lambda: len(dc.resumes) == 1 and dc.live, timeout=8)
            assert [m.text for m in await inbox.wait(2)] == ["one", "two"]
    assert any("no heartbeat ACK" in r.getMessage() for r in caplog.records)


async def test_supervisor_builds_a_new_client_when_discord_py_gives_up(dc: FakeDiscord) -> None:
    async with running(dc, backoff=Backoff(0.05, 2.0, 0.1)) as (channel, inbox):
        first = channel.client
        assert first is not None and first.ws is not None
        await first.ws.close(code=4011)  # a close code discord.py does not reconnect after
        await eventually(lambda: channel.client is not first and len(dc.identifies) == 2 and dc.live)
        dc.dm(USER, "back")
        [msg] = await inbox.wait(1)
        assert msg.text == "back"


async def test_a_gateway_down_at_start_does_not_hold_up_start(dc: FakeDiscord) -> None:
    dc.gateway_down = True
    channel = DiscordChannel(config(dc), start_wait=0.3)
    inbox = Inbox()
    try:
        await asyncio.wait_for(channel.start(inbox), 5)  # returns: the other channels can start
        assert channel.connections == 0
        dc.gateway_down = False
        await dc.wait_connected(1, timeout=15)
        dc.dm(USER, "finally")
        [msg] = await inbox.wait(1)
        assert msg.text == "finally" and channel.connections == 1
    finally:
        await channel.stop()


async def test_slash_commands_synced_once_across_reconnects_and_restarts(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, _):
        assert channel.commands_written == 1
        [put] = dc.command_puts
        assert {c["name"] for c in put} == {name for name, _ in COMMAND_MENU} >= {"stop", "new", "status", "help"}
        dc.drop()
        await dc.wait_connected(2)
    async with running(dc) as (channel, _):  # a restart: Discord already has them
        assert channel.commands_written == 0
    assert len(dc.command_puts) == 1 and dc.command_gets == 2


# ------------------------------------------------------------------------ slash commands


async def test_slash_command_is_deferred_and_its_answer_fills_the_reply(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    async with running(dc, {"guilds": [guild.id]}) as (channel, inbox):
        interaction = dc.slash("stop", guild.channel("general"), USER)
        [msg] = await inbox.wait(1)
        assert (msg.text, msg.addressed, msg.chat_id, msg.message_id, msg.sender.id) == (
            "/stop", True, str(guild.channel("general")), interaction["id"], str(USER))
        assert dc.callbacks == [(int(interaction["id"]), {"type": 5})]  # deferred before the core ran
        await channel.status(Target.of(msg), Status.WORKING)
        assert not dc.typing  # "thinking…" already shows
        answer = await channel.send(Target.of(msg), "Stopped. @everyone")
        [sent] = dc.sent
        assert (str(sent.message_id), sent.content, sent.payload["allowed_mentions"]) == (
            answer, "Stopped. @everyone", PING_NOBODY)
        assert ("PATCH", f"/webhooks/{dc.app_id}/{interaction['token']}/messages/@original") in dc.requests
        await channel.send(Target.of(msg), "a second chunk")  # goes to the channel as a plain message
        assert dc.sent[-1].channel_id == guild.channel("general")


async def test_slash_command_in_a_dm_and_one_nobody_answers(dc: FakeDiscord) -> None:
    async with running(dc, answer_wait=0.3) as (_, inbox):
        interaction = dc.slash("status", dc.dm_channel(USER), USER)
        [msg] = await inbox.wait(1)
        assert (msg.chat_type, msg.text) == (ChatType.DM, "/status")
        await dc.wait_for(lambda: dc.deleted_originals == [interaction["token"]], timeout=5)


async def test_slash_command_where_the_bot_is_not_allowed_gets_nothing(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    async with running(dc) as (_, inbox):
        dc.slash("help", guild.channel("general"), USER)
        await asyncio.sleep(0.3)
        assert not inbox.messages and not dc.callbacks


async def test_a_burst_never_blocks_the_gateway(dc: FakeDiscord, caplog: pytest.LogCaptureFixture) -> None:
    dc.heartbeat_ms = 100
    users = 50
    with caplog.at_level(logging.WARNING, logger="discord"):
        async with running(dc, heartbeat_timeout=3.0) as (channel, inbox):
            for i in range(1000):
                dc.dm(10_000 + i % users, f"message {i}")
            msgs = await inbox.wait(1000, timeout=30)
            assert sorted(int(m.text.split()[1]) for m in msgs) == list(range(1000))
            await asyncio.gather(*(channel.status(Target.of(m), Status.WORKING) for m in msgs[:users]))
            assert len(dc.identifies) == 1 and not dc.resumes  # the connection was never given up
    assert not [r.getMessage() for r in caplog.records if "blocked" in r.getMessage() or "behind" in r.getMessage()]
