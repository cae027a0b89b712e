"""PostgreSQL-only behaviour: its dialect of the migrations, opening, errors, and
``chatgate migrate`` from a SQLite file (checked by counts). The ports themselves are the
contract suite's (tests/test_store_contract.py, run over both stores)."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from bot.approvals import ledger
from bot.approvals.ledger import ApprovalRecord
from bot.capabilities import registry as capability_registry
from bot.cli import main
from bot.cluster import schema as cluster_schema
from bot.cluster.node import Cluster, ClusterSettings
from bot.conversation import Conversation
from bot.dashboard.reads import Reads
from bot.errors import SchemaTooNewError, StoreCorruptError, StoreError
from bot.llm import Message
from bot.media import ops as media_ops
from bot.messages import Answer, ChatType, Chunk, InboundMessage, Sender, Target
from bot.providers.base import Usage
from bot.schedules.jobs import Claim, Job, JobKind, RuleKind, When
from bot.schedules.store import StoredSchedules
from bot.store.base import Charge, InboundRecord, ModelChoice, Turn
from bot.store.migrations import MIGRATIONS
from bot.store.pg import PostgresStore, safe_url
from bot.store.pg.schema import DIALECT
from bot.store.reports import AuditEntry
from bot.store.sqlite import SQLiteStore
from bot.tracing import Span, SpanKind, TraceRecord
from tests.pg import fresh_database, require_server, with_database
from tests.test_cluster_lanes import Core


def message(message_id: str, text: str = "hi") -> InboundMessage:
    return InboundMessage("telegram", "bot1", "c1", ChatType.DM, Sender("u1", "Ada"), text, message_id)


def test_every_migration_is_written_once_and_rendered_in_postgres_words() -> None:
    assert list(DIALECT) == [m.name for m in MIGRATIONS]
    for name, sql in DIALECT.items():
        assert "{" not in sql, name  # every type token spelled
        assert not re.search(r"\b(REAL|BLOB|GLOB)\b|INTEGER PRIMARY KEY", sql), name  # SQLite's words


def test_the_password_never_leaves_the_url() -> None:
    assert safe_url("postgresql://bot:s3cret@db.internal:5433/chat") == "postgresql://bot:***@db.internal:5433/chat"
    assert safe_url("postgresql://bot@db/chat") == "postgresql://bot@db/chat"


async def test_migrations_are_recorded_once_even_when_instances_open_together() -> None:
    async with fresh_database(migrated=False) as url:
        stores = [PostgresStore(url) for _ in range(3)]
        await asyncio.gather(*(s.open() for s in stores))
        for s in stores:
            await s.close()
        conn = await asyncpg.connect(url)
        try:
            assert [r[0] for r in await conn.fetch("SELECT name FROM migrations ORDER BY id")] == list(DIALECT)
        finally:
            await conn.close()


async def test_a_schema_from_a_newer_chatgate_is_refused() -> None:
    async with fresh_database() as url:
        conn = await asyncpg.connect(url)
        await conn.execute("INSERT INTO migrations VALUES (999, '0999_from_the_future', 0)")
        await conn.close()
        with pytest.raises(SchemaTooNewError, match="newer|upgrade chatgate"):
            await PostgresStore(url).open()


async def test_a_database_with_tables_of_its_own_is_refused() -> None:
    async with fresh_database(migrated=False) as url:
        conn = await asyncpg.connect(url)
        await conn.execute("CREATE TABLE invoices (id int)")
        await conn.close()
        with pytest.raises(StoreCorruptError, match="not chatgate's"):
            await PostgresStore(url).open()


async def test_an_unreachable_server_is_one_store_error_without_the_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreError) as caught:
        await PostgresStore("postgresql://bot:s3cret@127.0.0.1:9/chat").open()
    assert "s3cret" not in str(caught.value) and "s3cret" not in caplog.text
    assert "127.0.0.1:9/chat" in str(caught.value)


async def test_an_occurrence_names_its_claimer_and_a_dead_ones_is_taken_over_once() -> None:
    async with fresh_database() as url, PostgresStore(url) as a, PostgresStore(url) as b:
        async with a.pool.acquire() as conn:
            await cluster_schema.apply(conn)  # the instances' heartbeats (none here: both are silent)
        b.claim_as("b", 5.0)
        a.claim_as("a", 5.0)
        conversation = Conversation.of_key("agent:main:telegram:dm:u1", account="bot1")
        a_jobs, b_jobs = StoredSchedules(a), StoredSchedules(b)
        job = await a_jobs.add_job(Job(0, JobKind.TASK, "t", When(RuleKind.EVERY, "UTC", 1000, 3600), conversation,
                                       "u1", next_at=1000), max_per_person=5)
        assert job is not None and await a_jobs.claim([Claim(job.id, 1000, 4600)]) == [True]
        assert await a.pool.fetchval("SELECT claimer FROM occurrences") == "a"
        [taken] = await b_jobs.unclosed()  # a never beat: it is gone, and b runs its occurrence again
        assert (taken.job.id, taken.at) == (job.id, 1000)
        assert await b_jobs.unclosed() == []  # b's own now, since this life of b began
        assert await a.pool.fetchval("SELECT claimer FROM occurrences") == "b"


# -- chatgate migrate -------------------------------------------------------------------


async def _fill(path: Path) -> dict[str, int]:
    """A SQLite database with a row in every table; the ids the test checks."""
    async with SQLiteStore(path) as store:
        session = await store.session("agent:main:telegram:dm:u1")
        answered = await store.record_inbound(message("m1"), session.key)
        waiting = await store.record_inbound(message("m2", "still waiting"), session.key)
        assert answered is not None and waiting is not None
        trace = TraceRecord("run1", session.key, "main", 100.0, 101.0, "completed", "m", 10, 5, 0.01, 1, None,
                            (Span(SpanKind.LLM, "m", 100.0, 12.5, 10, 5, 0.01),))
        owed = Answer("run1", "telegram", Target("c1", ChatType.DM), (Chunk("hello"), Chunk("", "a.bin", b"\x00\xff")),
                      (answered,), created_at=100.5)
        await store.append_turn(Turn(session, "run1", (Message.user("hi"), Message.assistant("hello")),
                                     Usage(10, 5), 0.01, "m", (answered,), trace, owed,
                                     charges=(Charge("telegram:u1", 15, 0.01),)))
        await store.chunk_sent(owed, 0, "501")
        code = await store.pairing_request("telegram", "u9", "Bo", now=100.0)
        assert code is not None
        await store.approve_pairing(code.code, 101.0)
        await store.pairing_request("telegram", "u8", "Cy", now=4e9)
        await store.write(ledger.add_approval(ApprovalRecord("a1", "run1", "c1", session.key, "telegram", "c1", "dm",
                                                             None, "exec", "telegram:u1", asked_at=100.0)))
        await store.write(ledger.grant("session", session.key, "exec", "*", "telegram:u1", 100.0))
        await store.write(media_ops.set_voice_mode("telegram", "c1", "auto"))
        await store.write(media_ops.record_audio("person:ada", 42.5, 100.0))
        conversation = Conversation.of_key(session.key, account="bot1")
        jobs = StoredSchedules(store)
        task = await jobs.add_job(Job(0, JobKind.TASK, "summarise", When(RuleKind.EVERY, "Europe/Berlin", 1000, 3600),
                                       conversation, "u1", "Ada", next_at=1000), max_per_person=5)
        assert task is not None
        assert await jobs.claim([Claim(task.id, 1000, 4600)]) == [True]  # running when the copy is made
        await jobs.set_zone("person:ada", "Europe/Berlin")
        await store.choose_model(session.key, ModelChoice("smart", "telegram:u1", 100.0))
        assert await store.set_title(session, "A greeting", "m")
        await Reads(store).record_action(AuditEntry(100.0, "admin", "operator", "login", "", "done", "127.0.0.1"))
        return {"session": session.id, "waiting": waiting, "job": task.id}


async def test_migrate_copies_every_table_and_checks_the_counts(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "chatgate.db"
    ids = await _fill(source)
    async with fresh_database() as url:
        assert await asyncio.to_thread(main, ["migrate", "--from", str(source), "--to", url]) == 0
        out = capsys.readouterr().out
        assert "(counts checked)" in out and "messages           2" in out and "chunks             2" in out
        async with PostgresStore(url) as store:
            session = await store.session("agent:main:telegram:dm:u1")
            assert session.id == ids["session"]
            assert [m.text for m in await store.history(session)] == ["hi", "hello"]
            assert [r.id for r in await store.unanswered()] == [ids["waiting"]]
            [owed] = await store.undelivered()
            assert owed.sent == 1 and owed.chunks[1] == Chunk("", "a.bin", b"\x00\xff")
            assert [t.run_id for t in await store.traces()] == ["run1"]
            assert await store.is_approved("telegram", "u9")
            assert [p.user_id for p in await store.pending_pairings(4e9)] == ["u8"]
            assert (await store.read(ledger.approval("a1"))) is not None
            assert await store.read(ledger.granted("session", session.key, "exec", "ls"))
            assert await store.usage_since("telegram:u1", 0) == (15, 0.01)
            assert await store.read(media_ops.voice_mode("telegram", "c1")) == "auto"
            assert await store.read(media_ops.audio_since("person:ada", 0)) == 42.5
            [task] = await StoredSchedules(store).jobs()
            assert (task.id, task.text, task.next_at, task.when.every) == (ids["job"], "summarise", 4600, 3600)
            [left] = await StoredSchedules(store).unclosed()  # the SQLite process's occurrence: a previous life's
            assert (left.job.id, left.at) == (ids["job"], 1000)
            assert await StoredSchedules(store).zone("person:ada") == "Europe/Berlin"
            assert await store.chosen_model(session.key) == ModelChoice("smart", "telegram:u1", 100.0)
            assert await store.title(session) == "A greeting"
            assert [(a.user, a.action) for a in await Reads(store).actions()] == [("admin", "login")]
            # the capabilities' tables came too; recall's index (derived) was rebuilt by its triggers
            async with store.pool.acquire() as conn:
                assert await conn.fetchval("SELECT count(*) FROM recall_messages") == 2
                assert await conn.fetchval("SELECT count(*) FROM capability_migrations WHERE name LIKE 'recall/%'") > 0
                # analyzed at once (COPY leaves the planner the empty tables' statistics)
                assert await conn.fetchval("SELECT reltuples FROM pg_class WHERE relname = 'messages'") == 2
            newer = await store.record_inbound(message("m3"), session.key)
            assert newer is not None and newer > ids["waiting"]  # ids go on after the copied ones
        assert await asyncio.to_thread(main, ["migrate", "--from", str(source), "--to", url]) == 1
        assert "is not empty" in capsys.readouterr().err


async def test_migrate_refuses_what_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = with_database(await require_server(), "postgres")
    assert await asyncio.to_thread(main, ["migrate", "--from", str(tmp_path / "nope.db"), "--to", url]) == 1
    assert "no SQLite database" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["migrate", "--from", str(tmp_path / "x.db"), "--to", "mysql://x"]) == 2


# -- a runtime role with data rights only (issue 32: DDL only where a migration is missing) ---------

DATA_RIGHTS = ('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}";'
               ' GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')


@asynccontextmanager
async def runtime_role(url: str) -> AsyncIterator[tuple[str, asyncpg.Connection]]:
    """A login role of this test's own that may use the schema but create nothing in it (the
    server's roles are shared: it is dropped at the end); its URL, and an owner's connection."""
    role = f"chatgate_rt_{uuid.uuid4().hex[:10]}"
    owner = await asyncpg.connect(url)
    await owner.execute(f'CREATE ROLE "{role}" LOGIN; GRANT USAGE ON SCHEMA public TO "{role}"')
    parts = urlsplit(url)
    try:
        yield urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}")), owner
    finally:
        await owner.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        await owner.execute(f'DROP OWNED BY "{role}"; DROP ROLE "{role}"')
        await owner.close()


async def test_a_runtime_role_with_data_rights_only_opens_a_migrated_store_and_joins_the_cluster() -> None:
    async with fresh_database(migrated=False) as url, runtime_role(url) as (runtime, owner):
        async with PostgresStore(url) as migrated:  # migrated by its owner (what `chatgate migrate --to` does)
            async with migrated.pool.acquire() as conn:
                await cluster_schema.apply(conn)
        role = urlsplit(runtime).username
        await owner.execute(DATA_RIGHTS.format(role=role))
        async with PostgresStore(runtime) as store:  # no DDL: the role could not make any
            cluster = Cluster(store.pool, runtime, ClusterSettings("rt", lease_seconds=3.0))
            store.fence_with(cluster.fence)
            await cluster.start(Core())
            try:
                key = "agent:main:telegram:dm:u1"
                inbound = await store.record_inbound(message("m1"), key)
                assert inbound is not None
                assert await cluster.claim(InboundRecord(inbound, key, message("m1"), 0.0))  # a lease: nextval of the fence
                answer = Answer("run1", "telegram", Target("u1", ChatType.DM), (Chunk("hello"),), (inbound,))
                await store.append_turn(Turn(await store.session(key), "run1", (Message.user("hi"),),
                                             inbound_ids=(inbound,), answer=answer))
                assert await cluster.still_holds(key) and [a.id for a in await store.undelivered()] == ["run1"]
            finally:
                await cluster.aclose()


async def test_chatgate_migrate_prepares_a_database_and_a_role_without_rights_is_told_to_run_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    async with fresh_database(migrated=False) as url, runtime_role(url) as (runtime, owner):
        with pytest.raises(StoreError) as refused:  # nothing migrated, and this role may not: one line
            await PostgresStore(runtime).open()
        assert "run `chatgate migrate --to postgresql://...` as a role that may create tables" in str(refused.value)
        assert "\n" not in str(refused.value)
        assert await asyncio.to_thread(main, ["migrate", "--to", url]) == 0
        steps = sum(len(spec.migrations) for spec in capability_registry.specs())  # the capabilities' tables too
        assert f"{len(DIALECT) + steps} store migrations and 1 cluster migration applied" in capsys.readouterr().out
        assert await asyncio.to_thread(main, ["migrate", "--to", url]) == 0
        assert "nothing to apply" in capsys.readouterr().out
        await owner.execute(DATA_RIGHTS.format(role=urlsplit(runtime).username))
        async with PostgresStore(runtime):
            pass
        await owner.execute("DELETE FROM migrations WHERE id = $1", len(DIALECT))  # one missing again
        last = MIGRATIONS[-1].name
        with pytest.raises(StoreError, match=rf"1 migration \({last}\) is pending.*chatgate migrate --to"):
            await PostgresStore(runtime).open()
