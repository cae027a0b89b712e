"""Who may see what (issue 37): each cell a test, on SQLite and PostgreSQL, through the store's
search itself (the scope is in the query), and the same table in pure Python (``Scope.sees``).

The people: Alice is linked (telegram:1 and discord:11), Bob (telegram:2) is not. Each said a
secret word in one place; the table says from where it may be found."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from bot.conversation import Conversation
from bot.llm import Message
from bot.recall.history import search, terms
from bot.recall.schema import MIGRATIONS
from bot.recall.scope import Scope, scope_of, scope_token
from bot.store.base import Turn
from bot.store.op import rows
from bot.store.pg import PostgresStore
from bot.store.sqlite import SQLiteStore
from tests.pg import fresh_database

pytestmark = pytest.mark.timeout(60)

LINKS = {"alice": ("telegram:1", "discord:11")}
PLACES = {  # where a word was said: the session key
    "alice_tg": "agent:main:telegram:dm:1",
    "alice_dc": "agent:main:discord:dm:11",
    "alice_linked": "agent:main:dm:alice",
    "alice_thread": "agent:main:telegram:dm:1:thread:7",
    "bob_tg": "agent:main:telegram:dm:2",
    "group": "agent:main:telegram:group:-100",
    "group_topic": "agent:main:telegram:group:-100:thread:5",
    "other_group": "agent:main:telegram:group:-200",
    "alice_member": "agent:main:telegram:group:-300:user:1",
    "bob_member": "agent:main:telegram:group:-300:user:2",
    "sub": "agent:main:telegram:dm:1:sub:1",
    "other_agent": "agent:other:telegram:dm:1",
    "prefix_user": "agent:main:telegram:dm:10",  # starts like telegram:1's key
    "group_member": "agent:main:telegram:group:-100:user:1",  # a member's own, in the shared group
    "group_sub": "agent:main:telegram:group:-100:sub:1",
    "topic_member": "agent:main:telegram:group:-300:thread:4:user:1",  # alice's own, in a topic
}
ASKERS = {  # who searches: their conversation
    "alice_tg": Conversation.of_key("agent:main:telegram:dm:1"),
    "alice_dc": Conversation.of_key("agent:main:discord:dm:11"),
    "alice_linked": Conversation.of_key("agent:main:dm:alice"),
    "bob": Conversation.of_key("agent:main:telegram:dm:2"),
    "group": Conversation.of_key("agent:main:telegram:group:-100"),
    "group_topic": Conversation.of_key("agent:main:telegram:group:-100:thread:5"),
    "other_group": Conversation.of_key("agent:main:telegram:group:-200"),
    "alice_member": Conversation.of_key("agent:main:telegram:group:-300:user:1"),
    "alice_sub": Conversation.of_key("agent:main:telegram:dm:1:sub:2"),
}
ASKERS["alice_tg"] = replace(ASKERS["alice_tg"], person="alice")  # as conversation_for makes it
ASKERS["alice_dc"] = replace(ASKERS["alice_dc"], person="alice")
ASKERS["alice_sub"] = replace(ASKERS["alice_sub"], person="alice")
ALICE_DMS = {"alice_tg", "alice_dc", "alice_linked", "alice_thread"}
GROUP = {"group", "group_topic"}
SEES = {
    "alice_tg": ALICE_DMS,
    "alice_dc": ALICE_DMS,
    "alice_linked": ALICE_DMS,
    "alice_sub": ALICE_DMS,  # a sub-agent sees what its parent sees
    "bob": {"bob_tg"},
    "group": GROUP,
    "group_topic": GROUP,
    "other_group": {"other_group"},
    "alice_member": {"alice_member"},
}
CELLS = [(asker, place) for asker in ASKERS for place in PLACES]


def word(place: str) -> str:
    return "zq" + place.replace("_", "x")


@pytest.mark.parametrize(("asker", "place"), CELLS)
def test_the_scope_in_python(asker: str, place: str) -> None:
    assert scope_of(ASKERS[asker].root, LINKS).sees(PLACES[place]) is (place in SEES[asker])


@pytest.mark.parametrize(("asker", "place"), CELLS)
def test_the_scope_in_the_index_tokens(asker: str, place: str) -> None:
    """What the index says (a message's session's token among the scope's) is the table too."""
    tokens = scope_of(ASKERS[asker].root, LINKS).tokens()
    assert (scope_token(PLACES[place]) in tokens) is (place in SEES[asker])


KEYS = [*PLACES.values(), "agent:main:dm:alice:thread:x", "agent:main:dm:alice:sub:1", "agent:dm:telegram:dm:1",
        "agent:main:dm:dm:1", "agent:main:telegram:dm:thread:thread:5", "agent:thread:telegram:group:5:thread:6",
        "agent:main:telegram:group:sub:user:1", "agent:main:telegram:dm:1:thread:2:sub:1", "agent:x", "odd",
        "agent:main:telegram:dm:1:thread:", "agent:main:telegram:dm:1:", "agent:main:telegram:group:5:thread:6:x"]


def test_scope_tokens() -> None:
    assert scope_token("agent:main:telegram:dm:1:thread:7") == "agent:main:telegram:dm:1"
    assert scope_token("agent:main:dm:alice:thread:x") == "agent:main:dm:alice"
    assert scope_token("agent:main:telegram:group:-100:thread:5") == "agent:main:telegram:group:-100"
    assert scope_token("agent:main:telegram:group:-100:user:1") == "agent:main:telegram:group:-100:user:1"
    assert scope_token("agent:main:telegram:dm:1:sub:1") == "agent:main:telegram:dm:1:sub:1"
    group = Conversation.of_key("agent:main:dm:group")  # a linked person named "group"
    assert scope_of(replace(group, person="group"), {"group": ("telegram:5",)}).tokens() == (
        "agent:main:dm:group", "agent:main:telegram:dm:5")
    with pytest.raises(ValueError, match="not a scope the index can say"):  # its members' sessions too
        Scope(("agent:main:telegram:group:1",), ("agent:main:telegram:group:1",)).tokens()


@asynccontextmanager
async def opened(kind: str, tmp_path: Path, *, bare: bool = False) -> AsyncIterator[SQLiteStore | PostgresStore]:
    """A store; ``bare``: a database no test used before (none of recall's migrations applied)."""
    if kind == "sqlite":
        async with SQLiteStore(tmp_path / "db.sqlite") as store:
            yield store
    else:
        async with fresh_database(migrated=not bare) as url, PostgresStore(url, pool_size=2) as pg:
            yield pg


async def said(store: SQLiteStore | PostgresStore, key: str, text: str, answer: str = "noted") -> None:
    session = await store.session(key)
    await store.append_turn(Turn(session, f"run-{key}-{text[:8]}", (Message.user(text), Message.assistant(answer))))


@pytest.fixture(params=["sqlite", "postgres"])
async def populated(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SQLiteStore | PostgresStore]:
    async with opened(request.param, tmp_path) as store:
        await store.apply_steps("recall", MIGRATIONS)
        for place, key in PLACES.items():
            await said(store, key, f"the secret word here is {word(place)}")
        yield store


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_the_database_computes_the_tokens_python_does(kind: str, tmp_path: Path) -> None:
    async with opened(kind, tmp_path) as store:
        await store.apply_steps("recall", MIGRATIONS)
        for key in KEYS:
            await store.session(key)
        got = await store.read(rows("SELECT s.key, c.token FROM sessions s"
                                    " JOIN recall_sessions r ON r.session_id = s.id"
                                    " JOIN recall_scopes c ON c.id = r.scope_id"))
        assert {str(k): str(t) for k, t in got} == {k: scope_token(k) for k in KEYS}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_the_migration_indexes_what_was_stored_before_it(kind: str, tmp_path: Path) -> None:
    """A database indexed by recall/0001 (no scope in the index) is converted by recall/0003."""
    async with opened(kind, tmp_path, bare=True) as store:
        await store.apply_steps("recall", MIGRATIONS[:2])
        for place, key in PLACES.items():
            await said(store, key, f"the secret word here is {word(place)}")
        await store.apply_steps("recall", MIGRATIONS)
        await said(store, PLACES["bob_tg"], "a later word zqlater")
        for asker, conversation in ASKERS.items():
            scope = scope_of(conversation.root, LINKS)
            for place in PLACES:
                hits = await store.read(search(store.engine, scope, terms(word(place)), 10))
                assert bool(hits) is (place in SEES[asker]), (asker, place)
        bob = scope_of(ASKERS["bob"].root, LINKS)
        later = await store.read(search(store.engine, bob, ["zqlater"], 10))
        assert [h.text for h in later] == ["a later word zqlater"]


async def test_the_index_alone_keeps_the_scope(populated: SQLiteStore | PostgresStore,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the second check of the messages found (``Scope.where``), the table still holds:
    the scope is in the index's query."""
    monkeypatch.setattr(Scope, "where", lambda self, column="s.key", subs=False: ("1 = 1", ()))
    await test_who_may_see_what(populated)


async def test_who_may_see_what(populated: SQLiteStore | PostgresStore) -> None:
    """Every cell of the table, each asker's search run for every word."""
    for asker, conversation in ASKERS.items():
        scope = scope_of(conversation.root, LINKS)
        for place in PLACES:
            hits = await populated.read(search(populated.engine, scope, terms(word(place)), 10))
            assert bool(hits) is (place in SEES[asker]), (asker, place)
            assert all(h.session_key == PLACES[place] for h in hits)
