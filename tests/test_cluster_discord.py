"""Discord on several instances: real `chatgate run` processes (three) on one PostgreSQL database,
the fake Discord (REST + gateway, shards) and the fake LLM (echoing) in this test process
(tests/cluster_bed.py). With ``shard_count`` and no ``shards``, each shard runs on the instance
holding its lease ``discord:shard:<id>/<count>``: every DM (shard 0) and guild message (the
guild's shard) answered exactly once over REST; SIGKILL of shard 0's holder hands the shard to
another instance, which answers the DMs from then on. Without ``shard_count``, every instance
opens the same unsharded connection and an event delivered to all three is answered once."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.cluster_bed import TOKEN, Instances, wait_until
from tests.fakes.discord_server import JSON, FakeDiscord, Guild, shard_of, snowflake
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.pg import fresh_database

pytestmark = pytest.mark.timeout(120)

COUNT = 2  # shards


def guild_on(dc: FakeDiscord, shard: int, name: str, channels: int = 3, *, skip: int = 0) -> Guild:
    """A guild whose id puts it on ``shard`` of ``COUNT`` (the ``skip``-th such id), with text
    channels c0, c1 ..."""
    n, found = 0, 0
    while True:
        gid = snowflake(n=n) + (n << 22)
        if shard_of(gid, COUNT) == shard and gid not in dc.guilds:
            if found == skip:
                break
            found += 1
        n += 1
    return dc.add_guild(name, guild_id=gid, channels={f"c{i}": 0 for i in range(channels)})


def mention(dc: FakeDiscord, channel: int, user: int, text: str) -> JSON:
    return dc.say(channel, user, f"<@{dc.bot_id}> {text}", mentions=[dc.bot_id])


def identified(dc: FakeDiscord, shard: int) -> int:
    """How many times a client identified on ``shard`` of ``COUNT``."""
    return sum(1 for i in dc.identifies if list(i.get("shard") or ()) == [shard, COUNT])


def sessions_live(dc: FakeDiscord) -> list[Any]:
    """The gateway sessions with an open connection (the fake keeps them private)."""
    live = {id(c.session): c.session for c in dc._conns if c.session is not None and not c.ws.closed}
    return list(live.values())


def answers(dc: FakeDiscord) -> Counter[tuple[int, str]]:
    return Counter((s.channel_id, s.content) for s in dc.sent)


def replies_to(dc: FakeDiscord) -> Counter[str]:
    """Per guild message id, how many of the bot's posts reply to it."""
    return Counter(str((s.payload.get("message_reference") or {}).get("message_id")) for s in dc.sent
                   if s.payload.get("message_reference"))


@asynccontextmanager
async def discord_cluster(tmp_path: Path, dc: FakeDiscord, **keys: Any) -> AsyncIterator[Instances]:
    async with fresh_database() as url, FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
            Instances(tmp_path, url, llm, tg, discord=dc, discord_keys=keys) as instances:
        await instances.start()
        yield instances


async def shards_up(cluster: Instances, dc: FakeDiscord, before: dict[int, int] | None = None) -> None:
    """Until each shard has identified (once more than ``before``) and both are connected."""
    before = before or {}
    await wait_until(lambda: all(identified(dc, s) > before.get(s, 0) for s in range(COUNT))
                     and len(sessions_live(dc)) == COUNT, 30, "both shards connected", cluster.tails)


async def settle(cluster: Instances, dc: FakeDiscord, expected: int) -> None:
    """Until ``expected`` posts are sent, then a while more (a duplicate would come in it)."""
    await wait_until(lambda: len(dc.sent) >= expected, 40, f"{expected} answers",
                     lambda: f"sent {[(s.channel_id, s.content) for s in dc.sent]}\n{cluster.tails(60)}")
    await asyncio.sleep(1.5)
    assert await cluster.query("SELECT count(*) FROM inbound WHERE answered_at IS NULL") == [(0,)], cluster.tails()


async def test_shards_by_lease_answer_every_dm_and_guild_message_once(tmp_path: Path) -> None:
    async with FakeDiscord() as dc:
        one, zero = guild_on(dc, 1, "on shard 1"), guild_on(dc, 0, "on shard 0")
        other = guild_on(dc, 1, "not allowed", skip=1)
        async with discord_cluster(tmp_path, dc, shard_count=COUNT, guilds=[str(one.id), str(zero.id)]) as cluster:
            await shards_up(cluster, dc)
            holders = {s: await cluster.holder(f"discord:shard:{s}/{COUNT}") for s in range(COUNT)}
            assert all(h.alive for h in holders.values())
            users = range(5001, 5007)
            for user in users:
                dc.dm(user, f"dm from {user}")
            in_one = [mention(dc, one.channel(f"c{n % 3}"), 6001 + n, f"shard one {n}") for n in range(6)]
            in_zero = [mention(dc, zero.channel(f"c{n}"), 7001 + n, f"shard zero {n}") for n in range(2)]
            ignored = mention(dc, other.channel("c0"), 8001, "nobody listens here")
            await settle(cluster, dc, len(users) + len(in_one) + len(in_zero))
            dms = {(dc.dm_channel(u), f"echo: dm from {u}") for u in users}
            got = answers(dc)
            assert {k: v for k, v in got.items() if k in dms} == dict.fromkeys(dms, 1), got
            guild_messages = in_one + in_zero
            assert replies_to(dc) == Counter({m["id"]: 1 for m in guild_messages}), got
            for m in guild_messages:  # each answered in its own channel, with its own text
                [post] = [s for s in dc.sent if str((s.payload.get("message_reference") or {}).get("message_id"))
                          == m["id"]]
                assert post.channel_id == int(m["channel_id"])
                assert post.content.startswith("echo:") and m["content"].split("> ", 1)[1] in post.content
            assert sum(got.values()) == len(dms) + len(guild_messages)
            assert ignored["id"] not in replies_to(dc)
            assert len(cluster.llm.requests) == len(dms) + len(guild_messages)
            assert [identified(dc, s) for s in range(COUNT)] == [1] * COUNT  # one client per shard, all along
            assert len(sessions_live(dc)) == COUNT  # the REST clients never connect
            now = {s: await cluster.holder(f"discord:shard:{s}/{COUNT}") for s in range(COUNT)}
            assert now == holders


async def test_sigkill_of_shard_0s_holder_hands_the_dms_to_another_instance(tmp_path: Path) -> None:
    async with FakeDiscord() as dc:
        one = guild_on(dc, 1, "on shard 1")
        async with discord_cluster(tmp_path, dc, shard_count=COUNT, guilds=[str(one.id)]) as cluster:
            await shards_up(cluster, dc)
            dc.dm(5000, "before the kill")
            await settle(cluster, dc, 1)
            holder = await cluster.holder(f"discord:shard:0/{COUNT}")
            moving = [s for s in range(COUNT) if (await cluster.holder(f"discord:shard:{s}/{COUNT}")) is holder]
            before = {s: identified(dc, s) for s in range(COUNT)}
            await cluster.kill(holder)
            killed = time.monotonic()
            successor = await cluster.holder(f"discord:shard:0/{COUNT}", timeout=30, not_=holder)
            await wait_until(lambda: all(identified(dc, s) > before[s] for s in moving)
                             and len(sessions_live(dc)) == COUNT, 30, "the shards taken over", cluster.tails)
            took = time.monotonic() - killed
            assert successor.alive and successor is not holder
            assert took < 4 * cluster.lease_seconds, took
            users = range(5001, 5006)
            for user in users:
                dc.dm(user, f"after the kill {user}")
            in_one = [mention(dc, one.channel(f"c{n % 3}"), 6001 + n, f"shard one {n}") for n in range(3)]
            await settle(cluster, dc, 1 + len(users) + len(in_one))
            got = answers(dc)
            expected = {(dc.dm_channel(5000), "echo: before the kill"),
                        *((dc.dm_channel(u), f"echo: after the kill {u}") for u in users)}
            assert {k: v for k, v in got.items() if k in expected} == dict.fromkeys(expected, 1), got
            assert replies_to(dc) == Counter({m["id"]: 1 for m in in_one}), got
            assert sum(got.values()) == len(expected) + len(in_one)
            assert [identified(dc, s) for s in range(COUNT)] == [before[s] + (s in moving) for s in range(COUNT)]
            for s in range(COUNT):
                assert (await cluster.holder(f"discord:shard:{s}/{COUNT}")).alive


async def test_unsharded_an_event_on_every_instances_connection_is_answered_once(tmp_path: Path) -> None:
    async with FakeDiscord() as dc:
        guild = dc.add_guild("everyone's", channels={"c0": 0, "c1": 0})
        async with discord_cluster(tmp_path, dc, guilds=[str(guild.id)]) as cluster:
            await wait_until(lambda: len(sessions_live(dc)) == 3, 30, "three connections", cluster.tails)
            assert not any(i.get("shard") not in (None, [0, 1]) for i in dc.identifies)
            sessions = sessions_live(dc)
            events = [dc.message(dc.dm_channel(5000 + n), 5000 + n, f"dm {n}") for n in range(4)]
            events += [dc.message(guild.channel(f"c{n}"), 6000 + n, f"<@{dc.bot_id}> guild {n}",
                                  mentions=[dc.bot_id]) for n in range(2)]
            for event in events:  # Discord delivering it on each connection: the store dedupes
                for session in sessions:
                    dc.dispatch("MESSAGE_CREATE", event, session=session)
            await settle(cluster, dc, len(events))
            got = answers(dc)
            expected = {(dc.dm_channel(5000 + n), f"echo: dm {n}") for n in range(4)}
            assert {k: v for k, v in got.items() if k in expected} == dict.fromkeys(expected, 1), got
            assert replies_to(dc) == Counter({e["id"]: 1 for e in events[4:]}), got
            assert sum(got.values()) == len(events)
            assert len(cluster.llm.requests) == len(events)
