"""PostgreSQL for tests: a database of its own per test, made from a migrated template.

The server is ``CHATGATE_TEST_DATABASE_URL`` (any database on it: this one only connects
there to create others), else the local one on 127.0.0.1:5432 if it answers. Without one,
the PostgreSQL tests skip with one line saying how to enable them; with
``CHATGATE_REQUIRE_POSTGRES=1`` (``.ci/run`` sets it) they fail instead.

The template (``chatgate_tpl_<pid>``) is migrated once per test process; a test's database is
``CREATE DATABASE ... TEMPLATE`` of it. Creating and dropping one takes 1 to 3 s on a small
machine with fsync on, so a database a test is done with is emptied (every table but the
migrations, its ids reset: ~50 ms) and handed to the next test instead; all are dropped when
the test process ends. No two tests ever hold one database at once.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from bot.messages import ChatType, InboundMessage, Sender
from bot.store.base import InboundRecord
from bot.store.pg import PostgresStore
from bot.store.pg.schema import names as schema_names

LOCAL = "postgresql://postgres@127.0.0.1:5432/postgres"
SKIP = ("PostgreSQL tests skipped: no server answered at {url} (set CHATGATE_TEST_DATABASE_URL=postgresql://..., "
        "or run .ci/run, which starts one)")
_server: dict[str, str | None] = {}  # "url" -> the server's URL once found, None when none answers
_template_lock = asyncio.Lock()
_template: dict[str, str] = {}
_free: list[str] = []  # emptied, migrated databases waiting for a test
_made: list[str] = []  # every database this process made, dropped at its end
_KEEP = ("migrations", "cluster_migrations", "capability_migrations")


def server_url() -> str:
    return os.environ.get("CHATGATE_TEST_DATABASE_URL") or LOCAL


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def _answers(url: str) -> bool:
    try:
        conn = await asyncpg.connect(url, timeout=3)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        return False
    await conn.close()
    return True


async def require_server() -> str:
    """The server's URL, or skip (fail when ``CHATGATE_REQUIRE_POSTGRES`` is set)."""
    if "url" not in _server:
        url = server_url()
        _server["url"] = url if await _answers(url) else None
    url = _server["url"]
    if url is None:
        message = SKIP.format(url=urlsplit(server_url()).netloc.rpartition("@")[2])
        if os.environ.get("CHATGATE_REQUIRE_POSTGRES"):
            pytest.fail(message.replace("skipped", "required"), pytrace=False)
        pytest.skip(message)
    return url


async def _admin(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _migrated_template(url: str) -> str:
    async with _template_lock:
        if "name" not in _template:
            name = f"chatgate_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
            await _admin(url, f'CREATE DATABASE "{name}"')
            async with PostgresStore(with_database(url, name)):
                pass
            _template["name"] = name
        return _template["name"]


@asynccontextmanager
async def fresh_database(*, migrated: bool = True) -> AsyncIterator[str]:
    """The URL of a database of this test's own: migrated and empty, or (``migrated=False``) bare."""
    url = await require_server()
    if migrated and _free:
        name = _free.pop()
    else:
        name = f"chatgate_t_{uuid.uuid4().hex[:12]}"
        template = await _migrated_template(url) if migrated else "template0"
        await _admin(url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        _made.append(name)
    reusable = migrated
    try:
        yield with_database(url, name)
    finally:
        if reusable and await _empty(with_database(url, name)):
            _free.append(name)


async def _empty(url: str) -> bool:
    """Empty every table but the migrations; False when the database cannot be reused."""
    try:
        conn = await asyncpg.connect(url, timeout=10)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    try:
        await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                           " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        tables = [r[0] for r in await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> ALL($1::text[])",
            list(_KEEP))]
        names = await conn.fetch("SELECT name FROM migrations ORDER BY id")
        if [r[0] for r in names] != list(schema_names()):
            return False
        identities = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND is_identity = 'YES'")
        async with conn.transaction():  # DELETE, not TRUNCATE: a tenth of the time on small tables
            await conn.execute("SET LOCAL session_replication_role = replica")  # no foreign key order to follow
            emptied = []
            for table in tables:
                if await conn.execute(f'DELETE FROM "{table}"') != "DELETE 0":
                    emptied.append(table)
            for table, column in identities:
                await conn.execute(f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), 1, false)")
        if emptied:  # their statistics too: a search that picks its way by the planner's estimate (recall's) must
            # not see the last test's rows in a database reused as fresh
            await conn.execute("ANALYZE " + ", ".join(f'"{table}"' for table in emptied))
        return True
    finally:
        await conn.close()


@asynccontextmanager
async def postgres_store() -> AsyncIterator[PostgresStore]:
    async with fresh_database() as url, PostgresStore(url) as store:
        yield store


def drop_templates() -> None:
    """At the end of the test process: every database it made, and the template."""
    asyncio.run(drop_made())


async def drop_made() -> None:
    """Drop every database this process made (and its template); from a running loop (bench)."""
    url = _server.get("url")
    names = [*_made, *([_template.pop("name")] if "name" in _template else [])]
    _made.clear()
    _free.clear()
    if url is None:
        return
    for name in names:
        await _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- a conversation's stored messages, for the cluster's tests ---------------------------

KEY = "agent:main:telegram:dm:7"
_STORED: dict[int, InboundMessage] = {}


async def stored(store: PostgresStore, message_id: str, text: str | None = None) -> int:
    """A DM of KEY stored as the intake stores it; its id."""
    msg = InboundMessage("telegram", "bot", "7", ChatType.DM, Sender("7"), text or f"text {message_id}", message_id)
    inbound_id = await store.record_inbound(msg, KEY)
    assert inbound_id is not None
    _STORED[inbound_id] = msg
    return inbound_id


def lane_record(inbound_id: int) -> InboundRecord:
    """A stored message as the intake claims its lane with it."""
    return InboundRecord(inbound_id, KEY, _STORED[inbound_id], time.time())
