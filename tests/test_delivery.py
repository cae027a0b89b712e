"""bot.delivery on its own: retries after an outage, with a recording channel and the real store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.backoff import Backoff
from bot.channels import SendFailed
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
