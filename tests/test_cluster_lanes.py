"""Two cluster members in one process, each with a recording core (``Host``): session lanes
claimed, handed over by NOTIFY, given back when idle; /stop answered where the lane is; a dead
member's sessions taken over; the LISTEN connection lost and found again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from bot.cluster import work
from bot.cluster.node import Cluster, ClusterSettings
from bot.messages import Answer, InboundMessage
from bot.peers import Stopped
from bot.store.base import InboundRecord
from bot.store.pg import PostgresStore
from tests.pg import KEY, lane_record, postgres_store, stored


class Core:
    """A ``bot.peers.Host`` that records what the cluster hands it."""

    def __init__(self) -> None:
        self.taken: list[int] = []
        self.texts: list[str] = []
        self.stops: list[str] = []
        self.lanes: set[str] = set()
        self.abandoned: list[str] = []
        self.delivered: list[str] = []
        self.decided: list[tuple[str, str, InboundMessage]] = []

    async def take(self, record: InboundRecord) -> None:
        self.taken.append(record.id)
        self.texts.append(record.message.text)
        self.lanes.add(record.session_key)

    async def stop_here(self, session_key: str) -> Stopped:
        self.stops.append(session_key)
        return True, 1, (99,)

    async def stop_chat_here(self, platform: str, chat_id: str) -> int:
        return 1

    def busy(self, session_key: str) -> bool:
        return session_key in self.lanes

    def abandon(self, session_key: str) -> None:
        self.abandoned.append(session_key)

    def deliver(self, answer: Answer) -> None:
        self.delivered.append(answer.id)

    async def decide_here(self, approval_id: str, decision: str, msg: InboundMessage) -> str | None:
        self.decided.append((approval_id, decision, msg))
        return None


@pytest.fixture
async def store() -> AsyncIterator[PostgresStore]:
    async with postgres_store() as opened:
        yield opened


@asynccontextmanager
async def members(store: PostgresStore, *names: str, lease: float = 3.0) -> AsyncIterator[list[tuple[Cluster, Core]]]:
    """Cluster members on one database, each with its recording core; they leave at the end."""
    joined: list[tuple[Cluster, Core]] = []
    try:
        for name in names:
            core = Core()
            cluster = Cluster(store.pool, store.where, ClusterSettings(name, lease_seconds=lease, sweep_grace=0.5))
            await cluster.start(core)
            joined.append((cluster, core))
        yield joined
    finally:
        for cluster, _ in joined:
            await cluster.aclose()


async def eventually(check: Callable[[], Any], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


async def test_a_lane_has_one_owner_others_hand_over_and_it_is_given_back_when_idle(store: PostgresStore) -> None:
    async with members(store, "a", "b") as [(a, a_core), (b, b_core)]:
        first = await stored(store, "m1")
        assert await a.claim(lane_record(first)) is True
        a_core.lanes.add(KEY)
        second = await stored(store, "m2")
        assert await b.claim(lane_record(second)) is False  # a holds the lane: told, with m2 in the notification
        await eventually(lambda: a_core.taken == [second])
        assert await a.claim(lane_record(second)) is False  # taken already: never decided twice
        assert b_core.taken == []
        assert await b.stop(KEY) == (True, 1, (99,)) and a_core.stops == [KEY]  # /stop where the lane is
        assert await a.stop(KEY) is None  # its own: stopped here by the caller
        await store.mark_answered([first, second])
        a_core.lanes.clear()
        a.idle(KEY)
        lane = f"session:{KEY}"
        for _ in range(100):  # a gives the lease back in a task of its own
            if await store.pool.fetchval("SELECT count(*) FROM cluster_leases WHERE name = $1", lane) == 0:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("a never gave the lane back")
        third = await stored(store, "m3")  # (stored while a still held it, a would be told and take it)
        assert await b.claim(lane_record(third)) is True


async def test_a_message_handed_over_comes_in_the_notification_or_when_too_big_from_the_store(
        store: PostgresStore) -> None:
    """The holder of a lane takes a message another member stored as the notification carries it
    (no read of the store); one too big for a notification it reads from the store."""
    async with members(store, "a", "b") as [(a, a_core), (b, _)]:
        first = await stored(store, "m1")
        assert await a.claim(lane_record(first)) is True
        a_core.lanes.add(KEY)
        small, big = "s" * 100, "b" * (work.HANDED_ROOM + 1)
        for message_id, text in (("m2", small), ("m3", big)):
            inbound_id = await stored(store, message_id, text)
            # the record claimed says otherwise than the row: which one the holder got shows where it came from
            told = lane_record(inbound_id)
            assert await b.claim(replace(told, message=replace(told.message, text=text.upper()))) is False
            await eventually(lambda: len(a_core.texts) == 1)
            assert a_core.texts.pop() == (small.upper() if text == small else big)


async def test_a_decision_for_an_approval_waiting_elsewhere_carries_who_decided_not_what_they_wrote(
        store: PostgresStore) -> None:
    """``/deny ID`` ignores what follows the id, so a person may write 4,096 characters after it: the
    notification to the instance where the run waits carries the sender and the chat, never the
    text, and so stays under PostgreSQL's 8,000 bytes."""
    async with members(store, "a", "b") as [(a, a_core), (b, _)]:
        first = lane_record(await stored(store, "m1"))
        assert await a.claim(first) is True
        a_core.lanes.add(KEY)
        waiting = SimpleNamespace(id="ap1", session_key=KEY)
        press = replace(first.message, text="/deny ap1 " + "я" * 4096)
        assert await b.decide_elsewhere(waiting, "deny", press) is None
        [(approval, decision, msg)] = a_core.decided
        assert (approval, decision, msg.text) == ("ap1", "deny", "")
        assert (msg.platform, msg.chat_id, msg.sender) == (press.platform, press.chat_id, press.sender)


async def test_an_idle_lane_is_kept_a_while_and_given_to_another_member_that_asks(store: PostgresStore) -> None:
    lane = f"session:{KEY}"

    async def holder() -> str | None:
        return await store.pool.fetchval("SELECT holder FROM cluster_leases WHERE name = $1", lane)

    async with members(store, "a", "b", lease=30.0) as [(a, a_core), (b, b_core)]:  # a beat of 10 s
        first = await stored(store, "m1")
        assert await a.claim(lane_record(first)) is True
        await store.mark_answered([first])
        a.idle(KEY)
        assert await holder() == "a"  # kept: the conversation's next message needs no lease statement
        second = await stored(store, "m2")
        assert await a.claim(lane_record(second)) is True
        third = await stored(store, "m3")
        assert await b.claim(lane_record(third)) is False  # b's message goes to a, whose lane it still is
        await eventually(lambda: a_core.taken == [third])
        await store.mark_answered([second, third])
        a_core.lanes.clear()
        a.idle(KEY)
        async with asyncio.timeout(8):  # well before a's heartbeat would give it back: a is asked
            await b.own(KEY)
        assert await holder() == "b" and b_core.taken == []


async def test_a_dead_members_sessions_and_answers_are_taken_over_once(store: PostgresStore) -> None:
    async with members(store, "a", "b", "c", lease=1.0) as [(a, _), (_, b_core), (_, c_core)]:
        inbound_id = await stored(store, "m1")
        assert await a.claim(lane_record(inbound_id)) is True
        await a._tasks.stop()  # a dies: no heartbeat, no release, its leases run out
        await a._bus.aclose()
        await eventually(lambda: b_core.taken or c_core.taken, timeout=10)
        await asyncio.sleep(1.0)
        assert sorted(b_core.taken + c_core.taken) == [inbound_id]  # once, by one of them


async def test_a_lost_listen_connection_comes_back_and_nothing_handed_over_is_missed(store: PostgresStore) -> None:
    async with members(store, "a", "b") as [(a, a_core), (b, _)]:
        first = await stored(store, "m1")
        assert await a.claim(lane_record(first)) is True
        a_core.lanes.add(KEY)
        await store.pool.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
                                 " AND pid <> pg_backend_pid()")
        second = await stored(store, "m2")
        await b.claim(lane_record(second))  # its NOTIFY may reach a, or be lost while a reconnects
        await eventually(lambda: a_core.taken == [second], timeout=15)
