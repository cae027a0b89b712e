"""The dashboard's reads beyond the store contract, on every store: payloads the SQL of either
dialect cannot read (an escaped surrogate, lone or paired, or NUL) are read in Python and
never break a page, and the search ignores ASCII case; and real pages served from a
PostgresStore (``chatgate dashboard`` alone on PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bot.dashboard.reads import Reads
from bot.dashboard.server import Dashboard
from bot.dashboard.settings import settings_of
from bot.llm import Message
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers.base import Usage
from bot.store.base import Charge, Session, Turn
from bot.store.pg import PostgresStore
from bot.store.sqlite import SQLiteStore
from bot.tracing import TraceRecord
from tests.dashboard_bed import PASSWORDS, Client, bed_config
from tests.fakes.llm_server import FakeLLM
from tests.pg import postgres_store

Store = SQLiteStore | PostgresStore


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = SQLiteStore(tmp_path / "chatgate.db") if request.param == "sqlite" else postgres_store()
    async with opened as s:
        yield s


async def _talk(store: Store, user: str, name: str, text: str, message_id: str) -> Session:
    key = f"agent:main:telegram:dm:{user}"
    await store.record_inbound(InboundMessage("telegram", "bot1", user, ChatType.DM, Sender(user, name), text,
                                              message_id), key)
    session = await store.session(key)
    await store.append_turn(Turn(session=session, run_id=f"run-{message_id}",
                                 messages=(Message.user(text), Message.assistant("ok")), usage=Usage(10, 2),
                                 cost=0.01, charges=(Charge(f"telegram:{user}", 12, 0.01),)))
    return session


async def test_names_and_texts_no_sql_can_read_are_read_all_the_same(store: Store) -> None:
    b = Reads(store)
    odd = await _talk(store, "1", "Ada \ud83d", "lone half", "m1")  # a lone surrogate, as a client may send
    rocket = await _talk(store, "2", "Bob \U0001f680", "fly", "m2")  # a pair: an emoji
    nul = await _talk(store, "3", "Cy", "a\x00b", "m3")
    await store.record_inbound(InboundMessage("telegram", "bot1", "4", ChatType.DM, Sender("4", "Di \U0001f600"),
                                              "waiting \ud83d", "m4"), "agent:main:telegram:dm:4")
    waiting = await store.session("agent:main:telegram:dm:4")
    listed = {s.id: s for s in await b.sessions()}
    assert listed[odd.id].sender == "Ada \ud83d" and listed[rocket.id].sender == "Bob \U0001f680"
    assert listed[nul.id].sender == "Cy"
    assert (listed[waiting.id].sender, listed[waiting.id].title) == ("Di \U0001f600", "waiting \ud83d")
    assert [s.id for s in await b.sessions("\U0001f680")] == [rocket.id]  # by the name, read in Python
    log = await b.session_log(odd.id)
    assert log is not None and log.session.sender == "Ada \ud83d"
    report = await b.daily_usage(time.time() - 86400)
    assert report.names == {"telegram:1": "Ada \ud83d", "telegram:2": "Bob \U0001f680", "telegram:3": "Cy",
                            "telegram:4": "Di \U0001f600"}


async def test_the_search_ignores_ascii_case_and_sub_agents(store: Store) -> None:
    b = Reads(store)
    ada = await _talk(store, "1", "Ada Lovelace", "Compute BERNOULLI numbers", "m1")
    await store.session("agent:main:telegram:dm:1:sub:1")
    for search in ("LOVELACE", "bernoulli", "TELEGRAM:DM:1", "Telegram"):
        assert [s.id for s in await b.sessions(search)] == [ada.id], search


async def test_a_day_is_counted_from_since_never_rounded_up(store: Store) -> None:
    b = Reads(store)
    session = await store.session("agent:main:telegram:dm:1")
    await store.append_turn(Turn(session=session, run_id="r", messages=(Message.user("x"),),
                                 charges=(Charge("telegram:1", 5, 0.1),)))
    now = time.time()
    since = now - 86400 * 0.6  # 0.6 of a day ago: day 0 (a cast to an integer would round it up on PostgreSQL)
    (day,) = (await b.daily_usage(since)).days
    assert day.day == since


# -- pages served from a PostgresStore --------------------------------------------------------


async def test_pages_are_served_from_a_postgres_store(tmp_path: Path, llm: FakeLLM) -> None:
    settings = settings_of(bed_config(tmp_path, llm))
    async with postgres_store() as store, Dashboard(settings, store) as dashboard:
        ada = await _talk(store, "1", "Ada Lovelace", "compute Bernoulli numbers", "m1")
        await _talk(store, "2", "Bob", "what of the budget?", "m2")
        await store.append_turn(Turn(session=ada, run_id="run-f", messages=(Message.user("again"),),
                                     trace=TraceRecord("run-f", ada.key, "main", 100.0, 101.0, "failed", "fake-model",
                                                       error="it broke")))
        url = dashboard.url.rstrip("/")
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                         timeout=aiohttp.ClientTimeout(total=10)) as session:
            http = Client(session, url)
            assert (await http.login("olive", PASSWORDS["olive"])).status == 303
            found = await http.get("/conversations?q=lovelace")
            page = await found.text()
            assert found.status == 200, page
            assert "1 session matching" in page and "Bernoulli" in page and "what of the budget" not in page
            assert f'href="/conversations/{ada.id}"' in page
            shown = await http.get(f"/conversations/{ada.id}")
            assert shown.status == 200 and "Ada Lovelace" in await shown.text()
            run = await http.get("/runs/run-f")
            assert run.status == 200 and "it broke" in await run.text()
            people = await http.get("/people")
            assert people.status == 200 and "Ada Lovelace" in await people.text()
            operations = await http.get("/operations")
            assert operations.status == 200 and "it broke" in await operations.text()
        assert [(e.user, e.action, e.outcome) for e in await Reads(store).actions()] == [("olive", "login", "done")]
