"""A turn commits only while its instance still holds the session's lane (issue 32 item 12).

Two cluster members on one real PostgreSQL database, each with a store of its own (as two
processes have): a member paused past its lease (its heartbeat stopped, as a VM freeze or a
long GC stops it) finds on waking that another member took the session over; its turn's
commit is rolled back (nothing stored, no answer owed) and ``still_holds`` says so before a
tool would act. A lease that merely ran out, with nobody taking it, still commits. And the same
with real ``chatgate run`` processes: one frozen with SIGSTOP in the middle of a turn, thawed
with SIGCONT after another instance answered, sends nothing."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from bot.cluster.node import Cluster, ClusterSettings
from bot.llm import Message
from bot.messages import Answer, Chunk, Target
from bot.store.base import LaneLost, Turn
from bot.store.pg import PostgresStore
from bot.store.pg.history import _FENCE as FENCE
from bot.store.pg.sql import numbered
from tests.cluster_bed import Instances, wait_until
from tests.fakes.llm_server import Reply
from tests.pg import KEY, fresh_database, lane_record, stored
from tests.test_cluster import cluster, sent_to  # noqa: F401 (cluster is a fixture)
from tests.test_cluster_lanes import Core

pytestmark = pytest.mark.timeout(90)



@asynccontextmanager
async def member(url: str, name: str, lease: float) -> AsyncIterator[tuple[Cluster, Core, PostgresStore]]:
    """One instance: its own store (fenced by its own cluster member, as ``App`` wires it)."""
    async with PostgresStore(url) as store:
        core = Core()
        cluster = Cluster(store.pool, store.where, ClusterSettings(name, lease_seconds=lease, sweep_grace=0.3))
        store.fence_with(cluster.fence)
        await cluster.start(core)
        try:
            yield cluster, core, store
        finally:
            await cluster.aclose()


async def turn(store: PostgresStore, run_id: str, inbound_id: int, key: str = KEY) -> Turn:
    """A finished run's turn with its answer owed, as the turn runner commits it."""
    answer = Answer(run_id, "telegram", Target("7"), (Chunk(f"answer of {run_id}"),), inbound_ids=(inbound_id,))
    return Turn(await store.session(key), run_id, (Message.user("hello"), Message.assistant(f"answer of {run_id}")),
                inbound_ids=(inbound_id,), answer=answer)


async def eventually(check: Callable[[], Any], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


async def paused(cluster: Cluster) -> None:
    """The member freezes: no heartbeat renews its leases (its memory still says it holds them)."""
    await cluster._tasks.stop()  # noqa: SLF001 - the heartbeat task


async def test_a_member_paused_past_its_lease_stores_and_sends_nothing_once_another_took_over() -> None:
    async with fresh_database() as url, member(url, "a", 1.0) as (a, _, store_a), \
            member(url, "b", 1.0) as (b, b_core, store_b):
        first = await stored(store_a, "m1")
        assert await a.claim(lane_record(first)) is True
        assert await a.still_holds(KEY) and not await b.still_holds(KEY)
        late = await turn(store_a, "run-a", first)  # a's run is under way ...
        await paused(a)  # ... when a freezes past its lease
        await eventually(lambda: b_core.taken == [first])  # b's sweep took the session over
        assert await b.still_holds(KEY) and not await a.still_holds(KEY)  # a's tool gate would stop here
        await store_b.append_turn(await turn(store_b, "run-b", first))  # b answers
        with pytest.raises(LaneLost):  # a wakes up and commits: rolled back
            await store_a.append_turn(late)
        pool = store_b.pool
        assert [r[0] for r in await pool.fetch("SELECT id FROM answers")] == ["run-b"]  # one answer owed
        assert await pool.fetchval("SELECT count(*) FROM messages") == 2  # b's turn only
        assert await pool.fetchval("SELECT count(*) FROM messages WHERE run_id = 'run-a'") == 0
        assert await pool.fetchval("SELECT count(*) FROM traces") == 0
        # what is not the conversation's (a title's or a summary's usage) is stored wherever it ran
        session = await store_a.session(KEY)
        await store_a.append_turn(Turn(session, "title-a", (), model="fake-model"))
        assert await pool.fetchval("SELECT count(*) FROM usage WHERE run_id = 'title-a'") == 1
        # a sub-agent's turn is fenced by its parent's lane
        sub = f"{KEY}:sub:1"
        await store_b.append_turn(Turn(await store_b.session(sub), "run-b-sub1", (Message.user("look"),)))
        with pytest.raises(LaneLost):
            await store_a.append_turn(Turn(await store_a.session(sub), "run-a-sub1", (Message.user("look"),)))


async def test_a_take_over_waits_for_a_commit_under_way_and_a_frozen_one_is_ended_by_the_server() -> None:
    async with fresh_database() as url, member(url, "a", 1.0) as (a, _, _), \
            member(url, "b", 1.0) as (b, b_core, store_b):
        first = await stored(store_b, "m1")
        assert await a.claim(lane_record(first)) is True
        await paused(a)
        fence = a.fence(KEY)
        frozen = await asyncpg.connect(url)  # a's commit: past its fence, then a freezes
        await frozen.execute("BEGIN")
        assert await frozen.fetchval(numbered(f"WITH {FENCE} SELECT count(*) FROM fence"), "2000", fence.lease,
                                     fence.holder, fence.token) == 1  # (a scheduled turn's commit: a transaction)
        began = time.monotonic()
        await eventually(lambda: b_core.taken == [first], timeout=15)
        assert time.monotonic() - began > 1.8  # not at the lease's end (1 s): the commit held the lease's row ...
        seen = await store_b.pool.fetchval(
            "SELECT extract(epoch from clock_timestamp()) - seen_at FROM cluster_instances WHERE id = 'b'")
        assert seen < 1.0  # ... and b's heartbeat went on meanwhile
        with pytest.raises(asyncpg.InterfaceError):  # the server ended the frozen commit: nothing of it stays
            await frozen.fetchval("SELECT 1")
        assert await b.still_holds(KEY) and b._held  # noqa: SLF001 - b lost nothing meanwhile


async def test_a_lease_that_ran_out_with_nobody_taking_it_still_commits() -> None:
    async with fresh_database() as url, member(url, "a", 0.5) as (a, _, store):
        first = await stored(store, "m1")
        assert await a.claim(lane_record(first)) is True
        await paused(a)
        await asyncio.sleep(0.8)  # past the lease: nobody else is there to take it
        assert not await a.still_holds(KEY)  # a tool would not run on a lease that ran out ...
        await store.append_turn(await turn(store, "run-a", first))  # ... but the turn is still a's alone
        assert await store.pool.fetchval("SELECT count(*) FROM answers") == 1


async def test_a_turn_of_a_lane_never_held_here_is_refused() -> None:
    async with fresh_database() as url, member(url, "a", 3.0) as (a, _, store):
        first = await stored(store, "m1")
        assert not await a.still_holds(KEY)
        with pytest.raises(LaneLost):
            await store.append_turn(await turn(store, "run-a", first))


@pytest.mark.parametrize("cluster", [{"count": 2}], indirect=True)
async def test_an_instance_frozen_mid_commit_past_its_lease_answers_once_when_it_thaws(cluster: Instances) -> None:
    """Real processes: the instance running the turn is frozen (SIGSTOP) in the middle of its
    commit (held there by a lock this test takes, then frees) for three leases' time. The commit is
    one statement, its lease check in it; whichever way the freeze falls, one answer in all and the
    other instance's heartbeat goes on. Frozen before the statement's execution (the lock holds up
    its preparation: a round trip of its own), it never runs while frozen: the other instance takes
    the session over and answers, and the thawed one's statement finds the lease gone and stores
    nothing. Frozen once the statement runs, the server finishes it without the client: the turn
    is stored (the lease was held when its check ran) and never run again; the other instance
    delivers it once the frozen one stops being seen, and the thawed one does not send it again."""
    tg, llm = cluster.tg, cluster.llm
    assert cluster.url is not None
    llm.script(Reply.text("from the frozen instance", chunk_size=100, delay=0.5), Reply.text("from the other instance"))
    blocker, watcher = await asyncpg.connect(cluster.url), await asyncpg.connect(cluster.url)
    try:
        assert await cluster.post(tg.message(31, "hello?", user_id=31)) == 200
        await llm.wait_for_requests(1, timeout=10)
        runner = await cluster.holder("session:agent:main:telegram:dm:31")
        other = next(i for i in cluster.items if i is not runner)
        assert runner.proc is not None
        await blocker.execute("BEGIN; LOCK TABLE usage IN SHARE ROW EXCLUSIVE MODE")
        await wait_until_async(lambda: watcher.fetchval(  # (a connection outside the lock's transaction sees it)
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '%INSERT INTO usage %'"),
            10, "the turn's commit under way")
        runner.proc.send_signal(signal.SIGSTOP)  # a VM freeze, a long GC, in the middle of the commit
        await blocker.execute("COMMIT")
        try:
            await asyncio.sleep(3 * cluster.lease_seconds)  # the other's sweeps find the session's lease run out
            assert len(sent_to(tg, 31)) <= 1, cluster.tails()
            seen = await watcher.fetchval("SELECT extract(epoch from clock_timestamp()) - seen_at FROM"
                                          " cluster_instances WHERE id = $1", other.name)
            assert seen < cluster.lease_seconds, seen  # its heartbeat never waited on the frozen commit
        finally:
            runner.proc.send_signal(signal.SIGCONT)
    finally:
        await blocker.close()
        await watcher.close()
    await wait_until(lambda: sent_to(tg, 31), 15, "the answer", cluster.tails)
    await asyncio.sleep(2 * cluster.lease_seconds)  # a second answer would be sent by now (or by a sweep)
    [answer] = [s.plain for s in sent_to(tg, 31)]
    if answer == "from the other instance":  # frozen before its commit ran: taken over, its own stored nothing
        assert "not stored" in runner.log.read_text(), cluster.tails()
    else:  # its commit ran while it was frozen: stored once, never run again
        assert answer == "from the frozen instance" and len(llm.requests) == 1, cluster.tails()
    assert runner.alive
    assert await cluster.query("SELECT count(*) FROM answers") == [(1,)]


@pytest.mark.parametrize("cluster", [{"count": 2}], indirect=True)
async def test_an_instance_frozen_mid_run_past_its_lease_stores_and_sends_nothing_when_it_thaws(
        cluster: Instances) -> None:
    """Real processes: frozen while the model answers, the instance wakes up after the other one
    took the session over and answered; whether its heartbeat or its commit comes first, it
    stores nothing of its turn (the conversation holds one question and one answer) and sends
    nothing."""
    tg, llm = cluster.tg, cluster.llm
    llm.script(Reply.text("from the frozen instance", chunk_size=100, delay=0.5), Reply.text("from the other instance"))
    assert await cluster.post(tg.message(32, "hello?", user_id=32)) == 200
    await llm.wait_for_requests(1, timeout=10)
    runner = await cluster.holder("session:agent:main:telegram:dm:32")
    assert runner.proc is not None
    runner.proc.send_signal(signal.SIGSTOP)  # its answer arrives while it is frozen
    try:
        await wait_until(lambda: sent_to(tg, 32), 30, "an answer from the other instance", cluster.tails)
    finally:
        runner.proc.send_signal(signal.SIGCONT)
    await wait_until(lambda: "not stored" in runner.log.read_text(), 15, "the thawed one's turn refused",
                     cluster.tails)
    await asyncio.sleep(2 * cluster.lease_seconds)
    assert [s.plain for s in sent_to(tg, 32)] == ["from the other instance"], cluster.tails()
    assert await cluster.query("SELECT role, count(*) FROM messages GROUP BY role ORDER BY role") == [
        ("assistant", 1), ("user", 1)]
    assert runner.alive


async def wait_until_async(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)
