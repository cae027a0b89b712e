"""overhead: what the bot itself adds to a message, with a model that answers at once, on
Telegram and on WhatsApp."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing
from pathlib import Path
from typing import Any, Protocol

from bench.common import BotProcess, cpu_seconds, percentiles, running_stack
from bench.report import Figure, Goal
from bench.whatsapp_stack import running_whatsapp_stack

NAME = "overhead"
HOW = ("DMs in 20 chats (quick: 10) after one unmeasured warm-up message per chat, twice: 'one at a time' "
       "sends the messages round-robin over the chats, the next once the previous answer arrived (latency "
       "without load); 'chats at once' lets every chat do that at the same time (each chat sequential, all "
       "chats concurrent). Telegram: latency = push to sendMessage, both timed by the fake Telegram. "
       "WhatsApp (figures marked so): the same with 20 people, latency = the fake Graph API starting the "
       "signed webhook POST to its recording the bot's POST <number>/messages. CPU = the bot process's "
       "user+system time (/proc/PID/stat) over the messages / their number. BENCH_OVERHEAD=telegram or "
       "=whatsapp runs one platform. BENCH_STORE=postgres runs on a fresh PostgreSQL database (found as the tests "
       "find it) instead of SQLite, and adds the CPU of the bot's PostgreSQL backends (/proc/PID/stat) per message. "
       "The warm-up is shown apart: a chat's first message opens its session, and after its answer the session is "
       "titled (models.titles: a second model call per new conversation, counted at the fake LLM); the measured "
       "phases have neither.")
FIRST_CHAT = 1000


class _Stack(Protocol):
    async def start_bot(self, *, extra: dict[str, Any] | None = None) -> BotProcess: ...
    async def ask(self, chat: int, text: str, timeout: float = 10.0) -> tuple[float, dict[str, Any]]: ...


PLATFORMS: dict[str, tuple[Callable[[], AbstractAsyncContextManager[Any]], str]] = {
    # name: (the stack, the answer's call as the latency label names it)
    "telegram": (running_stack, "push to sendMessage"),
    "whatsapp": (running_whatsapp_stack, "webhook to /messages"),
}


class _Sample:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.wrong = 0  # replies other than the echo

    async def ask(self, stack: _Stack, chat_id: int, text: str) -> None:
        pushed_at, reply = await stack.ask(chat_id, text)
        self.latencies.append(reply["time"] - pushed_at)
        self.wrong += reply["plain"] != f"echo: {text}"


async def run(quick: bool) -> list[Figure]:
    chosen = os.environ.get("BENCH_OVERHEAD", "").strip()
    if chosen and chosen not in PLATFORMS:
        raise ValueError(f"BENCH_OVERHEAD: one of {', '.join(PLATFORMS)}, got {chosen!r}")
    figures: list[Figure] = []
    store = os.environ.get("BENCH_STORE", "sqlite").strip()
    if store not in ("sqlite", "postgres"):
        raise ValueError(f"BENCH_STORE: sqlite or postgres, got {store!r}")
    for platform, (running, call) in PLATFORMS.items():
        if chosen in ("", platform):
            async with running() as stack, _database(store) as url:
                prefix = ("" if platform == "telegram" else f"{platform}, ") + ("postgres, " if url else "")
                figures += await _measure(stack, quick, prefix, call, url)
    return figures


@asynccontextmanager
async def _database(store: str) -> AsyncIterator[str | None]:
    if store == "sqlite":
        yield None
        return
    from tests.pg import drop_made, fresh_database

    try:
        async with fresh_database() as url:
            if commit := os.environ.get("BENCH_PG_SYNCHRONOUS_COMMIT"):  # e.g. off: what the WAL flush costs
                import asyncpg

                conn = await asyncpg.connect(url)
                try:
                    database = await conn.fetchval("SELECT current_database()")
                    await conn.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = '
                                       f"{'off' if commit == 'off' else 'on'}")
                finally:
                    await conn.close()
            yield url
    finally:
        await drop_made()


async def _backends(url: str) -> list[int]:
    """The PostgreSQL server processes serving the bot (on this machine), by pid."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                                " AND pid <> pg_backend_pid()")
    finally:
        await conn.close()
    return [int(r[0]) for r in rows]


async def _warm_up(stack: _Stack, bot: BotProcess, ids: list[int], prefix: str, url: str | None) -> list[Figure]:
    """Each chat's first message (its session opened, then titled aside), apart from the measured phases."""
    cpu = bot.cpu_seconds()
    await asyncio.gather(*(stack.ask(chat_id, "warm up") for chat_id in ids))
    titles = 0
    for _ in range(50):  # the titles are asked for after the answers, in the background
        if (titles := await _titles(stack, url)) >= len(ids):
            break
        await asyncio.sleep(0.1)
    cpu = bot.cpu_seconds() - cpu
    return [Figure(NAME, f"{prefix}warm-up: a new conversation's first message, bot CPU", cpu * 1000 / len(ids), "ms",
                   note="its session opened and, after the answer, titled: a second model call"),
            Figure(NAME, f"{prefix}warm-up: sessions titled (models.titles)", titles, "",
                   note=f"of {len(ids)} new conversations")]


async def _titles(stack: _Stack, url: str | None) -> int:
    """How many sessions have a title in the bot's database."""
    if url:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM session_titles"))
        finally:
            await conn.close()
    db = Path(getattr(stack, "tmp", ".")) / "chatgate.db"  # both stacks keep the database there
    if not db.is_file():
        return 0
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM session_titles").fetchone()[0])


def _cpu_of(pids: list[int]) -> dict[int, float]:
    cpu = {}
    for pid in pids:
        try:
            cpu[pid] = cpu_seconds(pid)
        except OSError:
            continue
    return cpu


async def _measure(stack: _Stack, quick: bool, prefix: str, call: str, url: str | None) -> list[Figure]:
    chats, messages = (10, 100) if quick else (20, 500)
    ids = [FIRST_CHAT + i for i in range(chats)]
    per_chat, extra = divmod(messages, chats)
    counts = [per_chat + (i < extra) for i in range(chats)]
    figures: list[Figure] = []
    bot = await stack.start_bot(extra={"storage": {"url": url}}) if url else await stack.start_bot()
    figures += await _warm_up(stack, bot, ids, prefix, url)

    async def converse(sample: _Sample, chat_id: int, count: int) -> None:
        for i in range(count):
            await sample.ask(stack, chat_id, f"at once {i}")

    for label, peer in (("one at a time", not prefix), ("chats at once", False)):
        sample = _Sample()
        async with bot.sampled(f"{prefix}{label}"):
            database = _cpu_of(await _backends(url)) if url else {}
            cpu = bot.cpu_seconds()
            if label == "one at a time":
                for i in range(messages):
                    await sample.ask(stack, ids[i % chats], f"alone {i}")
            else:
                await asyncio.gather(*(converse(sample, c, n) for c, n in zip(ids, counts)))
            cpu = bot.cpu_seconds() - cpu
            # a backend born meanwhile (the pool grew) counts whole
            server = sum(t - database.get(pid, 0.0) for pid, t in _cpu_of(await _backends(url)).items()) if url \
                else None
        figures += _figures(f"{prefix}{label}", call, sample, cpu, peer)
        if server is not None:
            n = len(sample.latencies)
            figures += [Figure(NAME, f"{prefix}{label}: PostgreSQL backends' CPU per message", server * 1000 / n, "ms"),
                        Figure(NAME, f"{prefix}{label}: bot + PostgreSQL CPU per message", (cpu + server) * 1000 / n,
                               "ms")]
    return figures


def _figures(label: str, call: str, sample: _Sample, cpu: float, peer: bool) -> list[Figure]:
    p = percentiles(sample.latencies)
    n = len(sample.latencies)
    figures = [
        Figure(NAME, f"{label}: {call}, median ({n} msgs)", p["p50"] * 1000, "ms", Goal("<", 15),
               "2.4 s" if peer else ""),
        Figure(NAME, f"{label}: {call}, p99", p["p99"] * 1000, "ms", Goal("<", 50)),
        Figure(NAME, f"{label}: bot CPU per message", cpu * 1000 / n, "ms", Goal("<", 3), "~120 ms" if peer else ""),
    ]
    if sample.wrong:
        figures.append(Figure(NAME, f"{label}: replies that were not the echo", sample.wrong, goal=Goal("=", 0)))
    return figures


