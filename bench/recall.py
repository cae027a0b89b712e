"""Recall: history_search over many stored messages, the index's cost on the message path, and
memory search over many passages (issue 37).

- history: 1,000,000 stored messages, 100,000 of them one person's (50 sessions, /new between
  them), spread among the rest, 9,000 other people's; words drawn from a Zipf vocabulary (no
  stop words: the commonest is in two messages of three). The messages are loaded in bulk into
  a database indexed by recall/0001 (its triggers), then recall/0003 converts it (the time
  shown: a database's upgrade, the scope put into the index). 300 searches
  of two words found in that person's messages, scoped to them (``bot.recall.history.search``
  through the store). Goal: p99 under 50 ms, on SQLite and on PostgreSQL.
- indexing: 4,000 turns (user + assistant message) stored with ``append_turn`` into a database
  with recall's triggers and one without; the difference per message. SQLite: CPU of this process
  (the driver's thread included); PostgreSQL: CPU of the server's backend (/proc; wall time if
  the server is not local). Goal: under 0.5 ms per message.
- memory: 10,000 passages in 100 memory files, embedded once (the fake embeddings endpoint,
  1536 dimensions); 200 hybrid searches (the query's embedding over local HTTP, BM25, cosine,
  fusion). Goal: p99 under 30 ms.

    python -m bench.recall [--messages 1000000] [--person 100000] [--skip-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench.common import percentiles, table, verdict
from bot.conversation import Conversation
from bot.llm import Message
from bot.recall.config import EmbeddingsConfig
from bot.recall.embeddings import Embeddings
from bot.recall.history import search, terms
from bot.recall.memory import MemoryIndex, Payer
from bot.recall.schema import MIGRATIONS
from bot.recall.scope import scope_of
from bot.store.base import Turn
from bot.store.op import value
from bot.store.sqlite import SQLiteStore

PERSON_KEY = "agent:main:telegram:dm:1"
VOCABULARY = 20_000
SESSIONS_OF_PERSON = 50
OTHERS = 9_000


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    words = [f"w{i:x}x" for i in range(VOCABULARY)]
    return words, [1.0 / (rank + 1) for rank in range(VOCABULARY)]


def texts(rng: random.Random, words: list[str], weights: list[float], n: int) -> list[str]:
    picked = rng.choices(words, weights, k=n * 14)
    return [" ".join(picked[i * 14:i * 14 + rng.randint(8, 14)]) for i in range(n)]


def rows_of(total: int, person: int, rng: random.Random) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """(sessions (id, key), messages (session id, role, parts))."""
    words, weights = vocabulary(rng)
    sessions = [(i + 1, PERSON_KEY) for i in range(SESSIONS_OF_PERSON)]
    sessions += [(SESSIONS_OF_PERSON + i + 1, f"agent:main:telegram:dm:{1000 + i}") for i in range(OTHERS)]
    body = texts(rng, words, weights, total)
    messages = []
    for n, text in enumerate(body):
        sid = (n % SESSIONS_OF_PERSON) + 1 if mine(n, total, person) else SESSIONS_OF_PERSON + 1 + (n % OTHERS)
        messages.append((sid, "user" if n % 2 == 0 else "assistant",
                         json.dumps([{"text": text, "type": "text"}], separators=(",", ":"))))
    return sessions, messages


def mine(n: int, total: int, person: int) -> bool:
    """Whether the n-th message is the person's: one in ``total // person``, spread over all."""
    step = max(1, total // person)
    return n % step == 0 and n // step < person


def queries(messages: list[tuple[int, str, str]], person: int, rng: random.Random, n: int = 300) -> list[str]:
    found = []
    step = max(1, len(messages) // person)
    for _ in range(n):
        words = json.loads(messages[rng.randrange(person) * step][2])[0]["text"].split()
        found.append(" ".join(rng.sample(words, 2)))
    return found


async def history_sqlite(folder: Path, total: int, person: int) -> dict[str, float]:
    rng = random.Random(7)
    sessions, messages = rows_of(total, person, rng)
    path = folder / "history.db"
    async with SQLiteStore(path) as store:
        await store.apply_steps("recall", MIGRATIONS[:2])
    db = sqlite3.connect(path)
    with db:
        db.executemany("INSERT INTO sessions (id, key, created_at, archived_at) VALUES (?, ?, 0, 1)", sessions)
        db.executemany("INSERT INTO messages (session_id, run_id, seq, role, parts, created_at)"
                       " VALUES (?, 'r', 0, ?, ?, 0)", messages)
    db.close()
    started = time.perf_counter()
    async with SQLiteStore(path) as store:
        await store.apply_steps("recall", MIGRATIONS)
    indexed = time.perf_counter() - started
    return await _searches(SQLiteStore(path), messages, person, indexed)


async def history_postgres(total: int, person: int) -> dict[str, float]:
    from bot.store.pg import PostgresStore
    from tests.pg import fresh_database

    rng = random.Random(7)
    sessions, messages = rows_of(total, person, rng)
    async with fresh_database(migrated=False) as url:
        import asyncpg

        async with PostgresStore(url, pool_size=2) as store:
            await store.apply_steps("recall", MIGRATIONS[:2])
        conn = await asyncpg.connect(url)
        try:
            await conn.copy_records_to_table("sessions", records=[(i, k, 0.0, 1.0) for i, k in sessions],
                                             columns=["id", "key", "created_at", "archived_at"])
            for at in range(0, len(messages), 100_000):
                await conn.copy_records_to_table(
                    "messages", records=[(s, "r", 0, role, parts, 0.0) for s, role, parts in messages[at:at + 100_000]],
                    columns=["session_id", "run_id", "seq", "role", "parts", "created_at"])
            started = time.perf_counter()
            async with PostgresStore(url, pool_size=2) as store:
                await store.apply_steps("recall", MIGRATIONS)
            indexed = time.perf_counter() - started
            await conn.execute("VACUUM ANALYZE recall_messages")  # as autovacuum would, soon after
            await conn.execute("ANALYZE sessions")
            await conn.execute("ANALYZE messages")
        finally:
            await conn.close()
        return await _searches(PostgresStore(url, pool_size=2), messages, person, indexed)


async def _searches(opened: object, messages: list[tuple[int, str, str]], person: int,
                    indexed: float) -> dict[str, float]:
    scope = scope_of(Conversation.of_key(PERSON_KEY))
    asked = queries(messages, person, random.Random(11))
    times, hits = [], 0
    async with opened as store:  # type: ignore[attr-defined]
        for q in asked[:20]:  # warm the caches
            await store.read(search(store.engine, scope, terms(q), 10))
        for q in asked:
            started = time.perf_counter()
            found = await store.read(search(store.engine, scope, terms(q), 10))
            times.append((time.perf_counter() - started) * 1000)
            hits += bool(found)
    return {**percentiles(times), "found": hits / len(asked), "index_s": indexed}


async def indexing(store_of: object, label: str, turns: int = 4000) -> float:
    """Seconds of CPU per message of storing turns: this process's on SQLite (the driver's thread
    included), the server backend's on PostgreSQL (read from /proc: the server is local; one
    connection), else the wall time."""
    rng = random.Random(3)
    words, weights = vocabulary(rng)
    body = texts(rng, words, weights, turns * 2)
    async with store_of as store:  # type: ignore[attr-defined]
        session = await store.session(PERSON_KEY)
        clock: Callable[[], float] = time.process_time
        if label == "postgres":
            pid = int(await store.read(value("SELECT pg_backend_pid()")))
            clock = partial(_server_cpu, pid) if _cpu_of(pid) is not None else time.perf_counter
        started = clock()
        for i in range(turns):
            await store.append_turn(Turn(session, f"run-{i}", (Message.user(body[2 * i]),
                                                               Message.assistant(body[2 * i + 1]))))
        return (clock() - started) / (turns * 2)


def _cpu_of(pid: int) -> float | None:
    """The CPU seconds (user and system) a local process has used (None: not a local process)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_cpu(pid: int) -> float:
    return _cpu_of(pid) or 0.0


async def indexing_cost(folder: Path, postgres: bool) -> dict[str, float]:
    found = {}
    plain = SQLiteStore(folder / "plain.db")
    indexed_path = folder / "indexed.db"
    async with SQLiteStore(indexed_path) as s:
        await s.apply_steps("recall", MIGRATIONS)
    without = await indexing(plain, "sqlite")
    with_ = await indexing(SQLiteStore(indexed_path), "sqlite")
    found["sqlite"] = (with_ - without) * 1000
    if postgres:
        from bot.store.pg import PostgresStore
        from tests.pg import fresh_database

        async with fresh_database() as a, fresh_database() as b:
            async with PostgresStore(b, pool_size=2) as s:
                await s.apply_steps("recall", MIGRATIONS)
            without = await indexing(PostgresStore(a, pool_size=1), "postgres")
            with_ = await indexing(PostgresStore(b, pool_size=1), "postgres")
            found["postgres"] = (with_ - without) * 1000
    return found


async def memory(folder: Path, passages: int = 10_000) -> dict[str, float]:
    from tests.fakes.embeddings_server import FakeEmbeddings

    rng = random.Random(5)
    words, weights = vocabulary(rng)
    root = folder / "workspace"
    (root / "memory").mkdir(parents=True)
    body = texts(rng, words, weights, passages * 2)
    per_file = passages // 100
    for f in range(100):
        lines = []
        for p in range(per_file):
            n = f * per_file + p
            lines += [f"## note {n}", body[2 * n], body[2 * n + 1], ""]
        (root / "memory" / f"2026-01-{f:03d}.md").write_text("\n".join(lines))
    async with FakeEmbeddings(dimensions=1536) as fake, SQLiteStore(folder / "memory.db") as store:
        await store.apply_steps("recall", MIGRATIONS)
        embeddings = Embeddings(EmbeddingsConfig(enabled=True, base_url=fake.base_url, api_key=None, dimensions=1536))
        index = MemoryIndex(store, embeddings)
        payer = Payer(("telegram:1",), "bench")
        started = time.perf_counter()
        ws = await index.workspace("bench", root, payer)
        first = time.perf_counter() - started
        asked = [" ".join(rng.sample(body[rng.randrange(len(body))].split(), 2)) for _ in range(200)]
        times = []
        for q in asked:
            started = time.perf_counter()
            await index.search("bench", root, q, 5, payer)
            times.append((time.perf_counter() - started) * 1000)
        await embeddings.aclose()
        return {**percentiles(times), "passages": len(ws.passages), "first_index_s": first}


async def main(total: int, person: int, postgres: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = []
        h = await history_sqlite(folder, total, person)
        rows.append(("history_search SQLite", f"{h['p50']:.1f}", f"{h['p99']:.1f}", f"{h['found']:.0%}",
                     f"{h['index_s']:.0f} s", verdict(h["p99"], 50)))
        print(*rows[-1], flush=True)
        os.remove(folder / "history.db")
        if postgres:
            h = await history_postgres(total, person)
            rows.append(("history_search PostgreSQL", f"{h['p50']:.1f}", f"{h['p99']:.1f}", f"{h['found']:.0%}",
                         f"{h['index_s']:.0f} s", verdict(h["p99"], 50)))
            print(*rows[-1], flush=True)
        m = await memory(folder)
        rows.append((f"memory_search {m['passages']:.0f} passages", f"{m['p50']:.1f}", f"{m['p99']:.1f}", "",
                     f"{m['first_index_s']:.1f} s", verdict(m["p99"], 30)))
        print(f"{total:,} messages, {person:,} of one person")
        print(table(("search", "p50 ms", "p99 ms", "found", "index built", "goal"), rows))
        cost = await indexing_cost(folder, postgres)
        print(table(("indexing on the message path", "ms per message", "goal"),
                    [(name, f"{ms:.3f}", verdict(ms, 0.5)) for name, ms in cost.items()]))
    if postgres:
        from tests.pg import drop_made

        await drop_made()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--person", type=int, default=100_000)
    parser.add_argument("--skip-postgres", action="store_true")
    a = parser.parse_args()
    asyncio.run(main(a.messages, a.person, not a.skip_postgres))
