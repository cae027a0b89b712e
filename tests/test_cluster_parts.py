"""The cluster's parts on a real PostgreSQL, in one process: leases and their fencing tokens,
per-person rates and budgets shared by instances, the status read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.cluster import rates, schema
from bot.cluster.leases import LeaseRows
from bot.cluster.status import format_status, read_status
from bot.limits import LimitSettings, PersonLimits, Refusal
from bot.llm import Message
from bot.store.base import Charge, Turn
from bot.store.pg import PostgresStore
from tests.pg import postgres_store


@pytest.fixture
async def store() -> AsyncIterator[PostgresStore]:
    async with postgres_store() as opened:
        async with opened.pool.acquire() as conn:
            await schema.apply(conn)
        yield opened


async def test_a_lease_has_one_holder_until_it_expires_and_then_a_higher_token(store: PostgresStore) -> None:
    a, b = LeaseRows("a", 1.0), LeaseRows("b", 1.0)
    first = await a.acquire(store.pool, "telegram:poller:1")
    assert first is not None
    assert await b.acquire(store.pool, "telegram:poller:1") is None
    assert await a.acquire(store.pool, "telegram:poller:1") == first  # again: the same token
    assert await b.holder_of(store.pool, "telegram:poller:1") == "a"
    await asyncio.sleep(1.1)  # a stops renewing
    taken = await b.acquire(store.pool, "telegram:poller:1")
    assert taken is not None and taken > first
    assert await a.renew(store.pool) == {}  # a learns it lost it
    assert await b.renew(store.pool) == {"telegram:poller:1": taken}
    await b.release(store.pool, "telegram:poller:1")
    assert await a.holder_of(store.pool, "telegram:poller:1") is None
    again = await a.acquire(store.pool, "telegram:poller:1")
    assert again is not None and again > taken  # released and taken again: still higher


async def test_concurrent_claims_of_one_lease_have_one_winner(store: PostgresStore) -> None:
    rows = [LeaseRows(f"i{n}", 15.0) for n in range(8)]
    tokens = await asyncio.gather(*(r.acquire(store.pool, "session:k") for r in rows))
    assert sum(t is not None for t in tokens) == 1


async def test_a_persons_rate_is_shared_by_every_instance(store: PostgresStore) -> None:
    class Shared:
        async def take_rate(self, person: str, capacity: float, per_second: float) -> float:
            return await rates.take(store.pool, person, capacity, per_second)

    settings = LimitSettings(messages_per_minute=3)
    one, two = (PersonLimits(settings, store, shared=Shared()) for _ in range(2))
    results = [await limits.check("telegram:42") for limits in (one, two, one, two)]
    assert [r is None for r in results] == [True, True, True, False]
    assert results[3] is not None and results[3].reason == "rate"
    assert await one.check("telegram:43") is None  # another person has a bucket of their own


async def test_a_budget_counts_what_another_instance_charged(store: PostgresStore) -> None:
    class Shared:
        async def take_rate(self, person: str, capacity: float, per_second: float) -> float:
            return 0.0

    settings = LimitSettings(messages_per_minute=None, daily_tokens=100)
    here = PersonLimits(settings, store, shared=Shared())
    assert await here.check("telegram:42") is None
    session = await store.session("k")  # another instance's run charges the person
    await store.append_turn(Turn(session, "r1", (Message.user("hi"),), charges=(Charge("telegram:42", 150, 0.1),)))
    refusal = await here.check("telegram:42")
    assert refusal is not None and refusal.reason == "tokens"


async def test_a_person_over_a_limit_is_told_once_whichever_instance_refuses(store: PostgresStore) -> None:
    class Shared:
        async def take_rate(self, person: str, capacity: float, per_second: float) -> float:
            return 1.0  # the shared bucket is empty

    settings = LimitSettings(messages_per_minute=3)
    one, two = (PersonLimits(settings, store, shared=Shared()) for _ in range(2))
    refusals = [await limits.check("telegram:42") for limits in (one, two, two, one)]
    assert [r.text != "" for r in refusals if r is not None] == [True, False, False, False]
    assert (await two.check("telegram:43") or Refusal("", "")).text  # another person is told too


async def test_status_shows_instances_what_they_own_and_lag(store: PostgresStore) -> None:
    now = "extract(epoch from clock_timestamp())"
    await store.pool.execute(f"INSERT INTO cluster_instances VALUES ('i1', 'host', 11, {now} - 100, {now}, NULL),"
                             f" ('i2', 'host', 12, {now} - 50, {now} - 40, NULL)")
    for name in ("session:a", "session:b", "telegram:poller:1"):
        await LeaseRows("i1", 15.0).acquire(store.pool, name)
    status = await read_status(store.pool, 15.0)
    assert [(i.id, i.alive, i.sessions, i.other) for i in status.instances] == [
        ("i1", True, 2, ("telegram:poller:1",)), ("i2", False, 0, ())]
    text = format_status(status, "postgresql://db/chat")
    assert "1 instance alive" in text and "owns 2 sessions, telegram:poller:1" in text and "i2" in text
    assert "0 messages not answered yet" in text
