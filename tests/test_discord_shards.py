"""Discord shards for several instances: each instance runs the shards it is given (or holds by
lease); a guild's events arrive on shard (guild id >> 22) % shard_count, DMs on shard 0; sends go
over REST from any instance. Two channels stand for two instances against one fake gateway."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.discord.channel import DiscordChannel
from adapters.discord.config import DiscordConfig
from bot.channels import Target
from bot.messages import InboundMessage
from tests.fakes.discord_server import FakeDiscord, Guild, shard_of, snowflake

USER = 4242


class Inbox:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    async def __call__(self, msg: InboundMessage) -> None:
        self.messages.append(msg)

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.messages]


@asynccontextmanager
async def running(dc: FakeDiscord, **keys: Any) -> AsyncIterator[tuple[DiscordChannel, Inbox]]:
    config = DiscordConfig.model_validate({"enabled": True, "token": dc.token, "api_base": dc.api_base,
                                           "gateway_url": dc.gateway_url, "guilds": ["*"], **keys})
    channel, inbox = DiscordChannel(config), Inbox()
    await asyncio.wait_for(channel.start(inbox), 10)
    try:
        yield channel, inbox
    finally:
        await channel.stop()


def guild_on(dc: FakeDiscord, shard: int, count: int) -> Guild:
    """A guild whose id puts it on ``shard`` of ``count``."""
    n = 0
    while shard_of(gid := snowflake(n=n) + (n << 22), count) != shard:
        n += 1
    return dc.add_guild(f"guild on {shard}", guild_id=gid)


def mention(dc: FakeDiscord, guild: Guild, text: str) -> None:
    dc.say(guild.channel("general"), USER, f"<@{dc.bot_id}> {text}", mentions=[dc.bot_id])


async def eventually(check: Callable[[], Any], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


def test_shards_need_a_count_and_must_fit_it() -> None:
    with pytest.raises(ValueError, match="shard_count"):
        DiscordConfig.model_validate({"shards": [0]})
    with pytest.raises(ValueError, match="below shard_count"):
        DiscordConfig.model_validate({"shard_count": 2, "shards": [2]})


async def test_each_instance_gets_the_events_of_its_own_shards_and_dms_come_on_shard_0() -> None:
    async with FakeDiscord() as dc:
        zero, one = guild_on(dc, 0, 2), guild_on(dc, 1, 2)
        async with running(dc, shard_count=2, shards=[0]) as (first, on_zero), \
                running(dc, shard_count=2, shards=[1]) as (second, on_one):
            await eventually(lambda: len(dc.identifies) == 2 and dc.live == 2)
            assert sorted(tuple(i["shard"]) for i in dc.identifies) == [(0, 2), (1, 2)]
            mention(dc, zero, "to shard zero")
            mention(dc, one, "to shard one")
            dc.dm(USER, "a direct message")
            await eventually(lambda: len(on_zero.messages) == 2 and len(on_one.messages) == 1)
            await asyncio.sleep(0.3)
            assert sorted(on_zero.texts) == ["a direct message", "to shard zero"]
            assert on_one.texts == ["to shard one"]
            reply = await second.send(Target.of(on_zero.messages[-1]), "sent from the other instance")  # REST
            assert reply and dc.sent[-1].content == "sent from the other instance"
            assert first.shard_clients.keys() == {0} and second.shard_clients.keys() == {1}


async def test_by_lease_one_instance_alone_runs_every_shard() -> None:
    async with FakeDiscord() as dc:
        guilds = [guild_on(dc, shard, 3) for shard in range(3)]
        async with running(dc, shard_count=3) as (channel, inbox):
            await eventually(lambda: len(channel.shard_clients) == 3 and dc.live == 3)
            for n, guild in enumerate(guilds):
                mention(dc, guild, f"hello {n}")
            dc.dm(USER, "and a DM")
            await eventually(lambda: len(inbox.messages) == 4)
            assert sorted(inbox.texts) == ["and a DM", "hello 0", "hello 1", "hello 2"]
