"""API and web chat turns with several instances on PostgreSQL: the Door takes the session's lane
as every turn does. Two cluster members in one process (as in test_cluster_lanes), the API's Door
on one of them over a recording core: a request waits while the other instance runs the session,
then runs where it was taken, and the message it stored is never handed on to another lane."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from bot.api.door import Door
from bot.api.people import Person
from bot.conversation import ChannelInfo
from bot.runs import Admission
from bot.store.pg import PostgresStore
from tests.test_cluster_lanes import members, store  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(60)
ALICE = Person("alice", "alice", (("telegram", "42"),))


class Dispatcher:
    """The turn runner's dispatcher, recording what is submitted (the lane runs nothing here)."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, Any]] = []

    def submit(self, key: str, pending: Any) -> Admission:
        self.submitted.append((key, pending))
        return Admission.STARTED

    def busy(self, key: str) -> bool:
        return any(k == key for k, _ in self.submitted)


def door_on(peers: Any, db: PostgresStore) -> tuple[Door, Dispatcher]:
    dispatcher = Dispatcher()
    core = SimpleNamespace(peers=peers, store=db, turns=SimpleNamespace(dispatcher=dispatcher),
                           access=SimpleNamespace(is_owner_of=lambda platform, user: False))
    door = Door(core)  # type: ignore[arg-type]
    door.start()
    return door, dispatcher


async def test_an_api_turn_waits_for_the_lane_runs_where_it_was_taken_and_is_never_handed_on(
        store: PostgresStore) -> None:  # noqa: F811
    conversation = ALICE.conversation("main", "api", "t1", ChannelInfo("api"))
    key = conversation.session_key
    async with members(store, "a", "b") as [(a, a_core), (b, b_core)]:
        door, dispatcher = door_on(b, store)
        b_core.busy = dispatcher.busy  # type: ignore[method-assign]  # b's lane is busy while its turn is queued
        await a.own(key)  # a runs the session now (another request's turn, on the other instance)
        a_core.lanes.add(key)
        sending = asyncio.ensure_future(door.send(ALICE, conversation, "hello", "api-1"))
        await asyncio.sleep(1.5)  # b waits for the lane: nothing stored, nothing run
        assert not sending.done() and dispatcher.submitted == []
        assert await store.pool.fetchval("SELECT count(*) FROM inbound WHERE session_key = $1", key) == 0
        a_core.lanes.clear()
        a.idle(key)  # a's turn ended: the lane is free, b takes it
        sent = await asyncio.wait_for(sending, 15)
        assert sent is not None and [k for k, _ in dispatcher.submitted] == [key]
        order = dispatcher.submitted[0][1].order
        assert order.payers == ("person:alice",) and order.users == ("alice",)  # acting for alice, on b
        holder = await store.pool.fetchval("SELECT holder FROM cluster_leases WHERE name = $1", f"session:{key}")
        assert holder == "b"
        # another request for the session, taken by a: a waits (b holds the lane); nothing of b's is
        # handed to a, and b, told to look at the session, does not take up its own API message again
        other, other_dispatcher = door_on(a, store)
        waiting = asyncio.ensure_future(other.send(ALICE, conversation, "and again", "api-2"))
        await asyncio.sleep(1.0)
        assert not waiting.done() and other_dispatcher.submitted == []
        await b._pull(key)  # as after a lost LISTEN connection: b looks at the session's waiting messages
        assert b_core.taken == [] and a_core.taken == []
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
