"""history_search's bounded ranking (bot.recall.history) on SQLite and PostgreSQL: a word in
more messages than are read whole (``WINDOW``, made small here) is a common one; the rarest
words decide, an old message with a rare word is still found, and the common word's weight is
added to it even when its own window does not reach that far back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.conversation import Conversation
from bot.recall import history
from bot.recall.history import search, terms
from bot.recall.schema import MIGRATIONS
from bot.recall.scope import scope_of
from bot.store.pg import PostgresStore
from bot.store.sqlite import SQLiteStore
from tests.test_recall_scope import opened, said

pytestmark = pytest.mark.timeout(60)

ME = "agent:main:telegram:dm:1"
OTHER = "agent:main:telegram:dm:2"


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SQLiteStore | PostgresStore]:
    monkeypatch.setattr(history, "WINDOW", 5)
    monkeypatch.setattr(history, "RECENT", 10)
    async with opened(request.param, tmp_path) as s:
        await s.apply_steps("recall", MIGRATIONS)
        await said(s, ME, "the venue is the old harbour hall, said in March", answer="ok")
        await said(s, ME, "the zebra book is Dune", answer="ok")
        for n in range(30):
            await said(s, OTHER, f"venue talk {n} zebra", answer="ok")  # another person's: never counted
            await said(s, ME, f"more venue news {n}", answer="fine")
        yield s


async def found(store: SQLiteStore | PostgresStore, query: str, limit: int = 3) -> list[str]:
    scope = scope_of(Conversation.of_key(ME))
    return [h.text for h in await store.read(search(store.engine, scope, terms(query), limit))]


async def test_the_rare_word_decides_and_the_oldest_message_is_found(store: SQLiteStore | PostgresStore) -> None:
    assert (await found(store, "venue harbour"))[0] == "the venue is the old harbour hall, said in March"
    assert await found(store, "zebra") == ["the zebra book is Dune"]  # the other person's zebras never


async def test_a_common_word_alone_gives_the_newest(store: SQLiteStore | PostgresStore) -> None:
    assert await found(store, "venue news") == ["more venue news 29", "more venue news 28", "more venue news 27"]


async def test_the_common_word_counts_beyond_its_window(store: SQLiteStore | PostgresStore) -> None:
    """"march venue": the first message holds both; "said in March" alone would tie with nothing."""
    [best] = await store.read(search(store.engine, scope_of(Conversation.of_key(ME)), ["march", "venue"], 1))
    assert best.text.startswith("the venue is") and best.score > 0
    harbour_only = await store.read(search(store.engine, scope_of(Conversation.of_key(ME)), ["march"], 1))
    assert best.score > harbour_only[0].score  # venue's weight was added, though it is older than venue's window


async def test_a_rare_word_is_found_whole_when_the_statistics_say_it_is_common(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL chooses how to read a word from the planner's estimate, which ANALYZE keeps:
    rows deleted since, or a copied database not yet analyzed (the estimate of a word in one row
    of 300,000 is then 1,856), make a rare word look common. One that none of the newest messages
    holds is looked up in the whole index all the same."""
    monkeypatch.setattr(history, "WINDOW", 5)
    monkeypatch.setattr(history, "RECENT", 10)
    async with opened("postgres", tmp_path) as s:
        await s.apply_steps("recall", MIGRATIONS)
        await said(s, ME, "the venue is the old harbour hall, said in March", answer="ok")
        for n in range(40):
            await said(s, ME, f"harbour gossip {n}", answer="fine")
        async with s.pool.acquire() as conn:
            await conn.execute("ANALYZE recall_messages")
            await conn.execute("DELETE FROM messages WHERE parts LIKE '%harbour gossip%'")
        for n in range(30):
            await said(s, ME, f"more venue news {n}", answer="fine")
        assert await found(s, "harbour") == ["the venue is the old harbour hall, said in March"]
