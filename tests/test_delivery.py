"""bot.delivery on its own: retries after an outage, with a recording channel and the real store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.backoff import Backoff
from bot.channels import SendFailed, Undelivered
from bot.delivery import Delivery, DeliverySettings
from bot.messages import Answer, ChatType, Chunk, Target
from bot.store.sqlite import SQLiteStore
from tests.fakes.channel import RecordingChannel

SLOW = DeliverySettings(retry_for=600.0, backoff=Backoff(base=60.0, factor=2.0, cap=60.0, jitter=False))


class Flaky(RecordingChannel):
    """Fails every send while ``down`` (as a 5xx would), and chat ``flooded`` with a flood wait."""

    def __init__(self) -> None:
        super().__init__("test")
        self.down = True
        self.flooded = ""
        self.tries: dict[str, int] = {}

    async def send(self, to: Target, text: str) -> str:
        self.tries[to.chat_id] = self.tries.get(to.chat_id, 0) + 1
        if to.chat_id == self.flooded:
            raise SendFailed("429 Too Many Requests", retry_after=60.0)
        if self.down:
            raise SendFailed("502 Bad Gateway")
        return await super().send(to, text)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "chatgate.db") as store:
        yield store


async def owe(store: SQLiteStore, delivery: Delivery, chat_id: str) -> None:
    answer = Answer(f"a-{chat_id}", "test", Target(chat_id, ChatType.DM), (Chunk(f"to {chat_id}"),))
    await store.store_answer(answer)
    delivery.push(answer)


async def test_after_an_outage_every_waiting_chat_is_sent_at_once(store: SQLiteStore) -> None:
    channel = Flaky()
    delivery = Delivery(store, {"test": channel}, SLOW)
    for chat_id in ("1", "2", "3"):
        await owe(store, delivery, chat_id)
    while len(channel.tries) < 3:  # each failed once and now waits a 60 s backoff
        await asyncio.sleep(0.01)
    channel.down = False
    await owe(store, delivery, "4")  # goes through: the outage is over for everyone
    await asyncio.wait_for(delivery.wait_idle(), 5)
    assert sorted(s.to.chat_id for s in channel.sent) == ["1", "2", "3", "4"]
    assert await store.undelivered() == []


async def test_a_flood_wait_is_waited_out_even_when_others_get_through(store: SQLiteStore) -> None:
    channel = Flaky()
    channel.down, channel.flooded = False, "9"
    delivery = Delivery(store, {"test": channel}, SLOW)
    await owe(store, delivery, "9")
    while not channel.tries.get("9"):
        await asyncio.sleep(0.01)
    await owe(store, delivery, "1")
    while not channel.sent:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert channel.tries["9"] == 1 and [s.to.chat_id for s in channel.sent] == ["1"]
    await delivery.aclose()


async def test_an_answer_pushed_twice_is_sent_once(store: SQLiteStore) -> None:
    channel = Flaky()
    channel.down = False
    delivery = Delivery(store, {"test": channel}, SLOW)
    answer = Answer("a-1", "test", Target("1", ChatType.DM), (Chunk("hello"),))
    await store.store_answer(answer)
    delivery.push(answer)
    await delivery.resume()  # finds it undelivered too
    await asyncio.wait_for(delivery.wait_idle(), 5)
    assert [s.text for s in channel.sent] == ["hello"]


class Recording(SQLiteStore):
    """The real store, whose record of a sent chunk waits until ``recorded`` is set."""

    recorded: asyncio.Event

    async def chunk_sent(self, answer: Answer, index: int, message_id: str | None) -> None:
        await self.recorded.wait()
        await super().chunk_sent(answer, index, message_id)


async def test_a_report_before_the_chunk_is_recorded_finds_it_and_owes_it_once(tmp_path: Path) -> None:
    async with Recording(tmp_path / "chatgate.db") as store:
        store.recorded = asyncio.Event()
        channel = Flaky()
        channel.down = False
        delivery = Delivery(store, {"test": channel}, SLOW)
        answer = Answer("a-1", "test", Target("1", ChatType.DM), (Chunk("one"), Chunk("two")))
        await store.store_answer(answer)
        delivery.push(answer)
        while not channel.sent:
            await asyncio.sleep(0.01)
        lost = Undelivered(channel.sent[0].message_id, "the platform lost it", retry=True)
        assert await delivery.undelivered("test", lost)  # found while its record is still being written
        assert await delivery.undelivered("test", lost)  # said twice: owed once
        assert not await delivery.undelivered("test", Undelivered("unknown", "?", retry=True))  # not an answer's
        store.recorded.set()
        await asyncio.wait_for(delivery.wait_idle(), 5)
        assert [s.text for s in channel.sent] == ["one", "two", "one"]  # the lost chunk again, after the rest
        assert await store.answer_state("a-1-again-0") == "delivered"
        again = await store.sent_as("test", channel.sent[2].message_id)
        assert again is not None and again[0].id == "a-1-again-0"
        assert await delivery.undelivered("test", Undelivered(channel.sent[2].message_id, "lost again", retry=True))
        assert await store.answer_state("a-1-again-0-again-0") == "given_up"  # sent again at most once
        assert len(channel.sent) == 3
