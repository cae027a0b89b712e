"""Questions with buttons on Discord (the port's ``Asks``): the real discord.py against the
fake Discord, the channel alone with a recording inbox.

What every channel does is in the channel contract suite; here what is Discord's own: the
components and their 100-character custom ids, a press answered (deferred) well within 3 s,
buttons of a message sent by an earlier process (no state survives a restart), a press
replayed by the gateway, presses outside the allowed guilds, the ephemeral follow-up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.discord.channel import DiscordChannel
from adapters.discord.config import DiscordConfig
from bot.channels import Asks, Choice, Target
from bot.messages import ChatType
from tests.fakes.channel import CHOICES, RecordingInbox
from tests.fakes.discord_server import FakeDiscord

USER, OTHER = 4242, 4343


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


@asynccontextmanager
async def running(dc: FakeDiscord, **keys: Any) -> AsyncIterator[tuple[DiscordChannel, RecordingInbox]]:
    config = DiscordConfig.model_validate({"enabled": True, "token": dc.token, "api_base": dc.api_base,
                                           "gateway_url": dc.gateway_url, **keys})
    channel = DiscordChannel(config)
    inbox = RecordingInbox()
    await asyncio.wait_for(channel.start(inbox), 10)
    await dc.wait_connected()
    try:
        yield channel, inbox
    finally:
        await channel.stop()


def dm(dc: FakeDiscord) -> Target:
    return Target(str(dc.dm_channel(USER)))


async def test_the_question_has_one_row_of_buttons_and_no_view_is_kept(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, _):
        assert isinstance(channel, Asks)
        question = await channel.ask(dm(dc), "Allow `exec`?", CHOICES)
        (sent,) = dc.sent
        assert str(sent.message_id) == question and sent.content == "Allow `exec`?"
        (row,) = sent.payload["components"]
        assert [(b["type"], b["custom_id"], b["label"]) for b in row["components"]] == [
            (2, c.id, c.label) for c in CHOICES]
        assert dc.buttons(question) == [c.id for c in CHOICES]
        assert channel.client is not None and not channel.client._connection._view_store.persistent_views
        assert channel.client._connection._view_store._synced_message_views == {}


async def test_six_choices_take_two_rows_and_a_long_custom_id_is_refused(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, _):
        await channel.ask(dm(dc), "Pick", [Choice(f"c{i}", f"Choice {i}") for i in range(6)])
        assert [len(row["components"]) for row in dc.sent[0].payload["components"]] == [5, 1]
        with pytest.raises(ValueError, match="100"):
            await channel.ask(dm(dc), "?", [Choice("x" * 101, "Too long")])
        assert len(dc.sent) == 1


async def test_a_press_is_deferred_within_3_s_then_answered_privately(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0})
    general = guild.channel("general")
    async with running(dc, guilds=[str(guild.id)]) as (channel, inbox):
        question = await channel.ask(Target(str(general), ChatType.GROUP), "Allow?", CHOICES)
        interaction = dc.press(question, CHOICES[0].id, OTHER)
        (press,) = await inbox.wait(1)
        iid = int(interaction["id"])
        assert dc.callbacks == [(iid, {"type": 6})]  # a deferred update: the message stays as it is
        assert dc.answered[iid] - dc.dispatched[iid] < 3.0
        assert (press.chat_id, press.chat_type, press.thread_id, press.sender.id, press.reply_to, press.text) == (
            str(general), ChatType.GROUP, None, str(OTHER), question, CHOICES[0].id)
        assert press.message_id == f"int:{iid}" and press.addressed
        await channel.answer_press(press, "Only the person who asked can decide.")
        await channel.answer_press(press, "twice")  # the core answers once; a second one is not sent
        (followup,) = dc.followups
        assert followup.ephemeral and followup.content == "Only the person who asked can decide."
        assert followup.interaction_id == iid


async def test_a_press_in_a_thread_is_in_the_thread(dc: FakeDiscord) -> None:
    guild = dc.add_guild(channels={"general": 0}, threads={"topic": "general"})
    async with running(dc, guilds=[str(guild.id)]) as (channel, inbox):
        to = Target(str(guild.channel("general")), ChatType.GROUP, str(guild.channel("topic")))
        question = await channel.ask(to, "Allow?", CHOICES)
        assert dc.sent[0].channel_id == guild.channel("topic")
        dc.press(question, CHOICES[3].id, USER)
        (press,) = await inbox.wait(1)
        assert (press.chat_id, press.thread_id) == (str(guild.channel("general")), str(guild.channel("topic")))


async def test_buttons_sent_by_an_earlier_process_still_work(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, _):
        question = await channel.ask(dm(dc), "Allow?", CHOICES)
    async with running(dc) as (fresh, inbox):  # a new process: nothing of the first one is left
        interaction = dc.press(question, CHOICES[1].id, USER)
        (press,) = await inbox.wait(1)
        assert (press.reply_to, press.text, press.sender.id) == (question, CHOICES[1].id, str(USER))
        iid = int(interaction["id"])
        assert dc.answered[iid] - dc.dispatched[iid] < 3.0
        await fresh.close_question(dm(dc), question, "exec: allowed for this session by Alice")
        assert dc.buttons(question) == [] and dc.messages[int(question)]["content"].startswith("exec: allowed")


async def test_a_replayed_press_comes_again_with_the_same_id(dc: FakeDiscord) -> None:
    async with running(dc) as (channel, inbox):
        question = await channel.ask(dm(dc), "Allow?", CHOICES)
        interaction = dc.press(question, CHOICES[0].id, USER)
        await inbox.wait(1)
        dc.dispatch("INTERACTION_CREATE", interaction)  # what a RESUME replays
        first, again = await inbox.wait(2)
        assert first.message_id == again.message_id
        assert [body for _, body in dc.callbacks] == [{"type": 6}, {"type": 6}]  # the second is refused: 40060


async def test_presses_where_the_bot_does_not_serve_or_on_other_messages_are_ignored(dc: FakeDiscord) -> None:
    allowed, other = dc.add_guild(channels={"general": 0}), dc.add_guild(channels={"general": 0})
    async with running(dc, guilds=[str(allowed.id)]) as (channel, inbox):
        foreign = await channel.ask(Target(str(other.channel("general")), ChatType.GROUP), "?", CHOICES)
        dc.press(foreign, CHOICES[0].id, USER)
        someone = dc.say(allowed.channel("general"), OTHER, "a user's message")
        someone["components"] = [{"type": 1, "components": [{"type": 2, "custom_id": "theirs", "label": "x"}]}]
        dc.press(someone["id"], "theirs", USER)
        mine = await channel.ask(Target(str(allowed.channel("general")), ChatType.GROUP), "?", CHOICES)
        dc.press(mine, CHOICES[0].id, USER)  # dispatched after the others: it arrives after them
        (press,) = await inbox.wait(1)
        await asyncio.sleep(0.2)
        assert press.reply_to == mine and len(inbox.messages) == 1
