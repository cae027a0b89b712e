"""cluster: several instances on one PostgreSQL database (needs a server, as the tests find it)."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bench.common import cpu_seconds, percentiles
from bench.report import Figure, Goal
from tests.cluster_bed import TOKEN, Instances, wait_until
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.pg import drop_made, fresh_database

NAME = "cluster"
HOW = ("Real `chatgate run` processes on one PostgreSQL database (a fresh one per part), Telegram in webhook mode "
       "behind a round-robin balancer, the fake Telegram, the fake LLM and the balancer in the bench process (on the "
       "same 2 cores). Burst: N DMs from N chats (1,000; quick: 200) posted 50 at a time, one instance vs two vs "
       "three: seconds from the first post to the last answer, each chat answered exactly once. /stop across "
       "instances: a long answer streams on one instance, /stop is posted so that another receives it; time from "
       "the post to the model stream closed, 20 tries (quick: 6). CPU per message: one instance, 200 (quick: 60) "
       "DMs one at a time, the bot process's CPU, on PostgreSQL and on SQLite. Takeover: the instance streaming an "
       "answer is SIGKILLed (cluster.lease_seconds 3; default 15), time until another delivers it.")


async def burst(url: str, count: int, chats: int) -> tuple[float, int, int, float, float]:
    """(seconds, chats answered, answers sent, the instances' CPU seconds, this process's: the fakes and the
    balancer) for ``chats`` DMs over ``count`` instances."""
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
                Instances(Path(tmp), url, llm, tg, count, lease_seconds=15) as cluster:
            await cluster.start()
            gate = asyncio.Semaphore(50)

            async def post(chat: int) -> None:
                async with gate:
                    await cluster.post(tg.message(chat, f"hello {chat}", user_id=chat))

            pids = [i.proc.pid for i in cluster.items if i.proc is not None]
            cpu = sum(cpu_seconds(pid) for pid in pids), cpu_seconds()
            started = time.monotonic()
            await asyncio.gather(*(post(5000 + n) for n in range(chats)))
            await wait_until(lambda: len(tg.sent) >= chats, 300, "every chat answered", cluster.tails)
            took = max(s.time for s in tg.sent) - started
            used = sum(cpu_seconds(pid) for pid in pids) - cpu[0], cpu_seconds() - cpu[1]
            await asyncio.sleep(1.0)
            return took, len({s.chat_id for s in tg.sent}), len(tg.sent), *used


async def stop_latency(url: str, tries: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
                Instances(Path(tmp), url, llm, tg, 2, lease_seconds=15) as cluster:
            await cluster.start()
            took: list[float] = []
            for n in range(tries):
                chat = 7000 + n
                llm.script(Reply.text("story " * 2000, chunk_size=8, delay=0.02))
                await cluster.post(tg.message(chat, "a long story please", user_id=chat))
                await llm.wait_for_requests(n + 1, timeout=20)
                runner = await cluster.holder(f"session:agent:main:telegram:dm:{chat}")
                cluster.balancer.aim(1 - cluster.items.index(runner))  # the /stop reaches the other instance
                sent = time.monotonic()
                await cluster.post(tg.message(chat, "/stop", user_id=chat))
                await asyncio.wait_for(llm.requests[n].disconnected.wait(), 10)
                took.append((time.monotonic() - sent) * 1000)
            return took


async def cpu_per_message(url: str | None, messages: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
                Instances(Path(tmp), url, llm, tg, 1) as cluster:
            await cluster.start()
            proc = cluster.items[0].proc
            assert proc is not None
            for n in range(10):  # warm-up
                await cluster.post(tg.message(6000 + n, "warm up", user_id=6000 + n))
            await wait_until(lambda: len(tg.sent) >= 10, 60, "warm-up answered", cluster.tails)
            before = cpu_seconds(proc.pid)
            for n in range(messages):
                await cluster.post(tg.message(6100 + n % 20, f"message {n}", user_id=6100 + n % 20))
                await wait_until(lambda: len(tg.sent) >= 11 + n, 30, "answered", cluster.tails)
            return (cpu_seconds(proc.pid) - before) * 1000 / messages


async def takeover(url: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
                Instances(Path(tmp), url, llm, tg, 3, lease_seconds=3) as cluster:
            await cluster.start()
            llm.script(Reply.text("slow " * 1000, chunk_size=8, delay=0.05))
            await cluster.post(tg.message(8000, "hello", user_id=8000))
            await llm.wait_for_requests(1, timeout=20)
            runner = await cluster.holder("session:agent:main:telegram:dm:8000")
            await cluster.kill(runner)
            killed = time.monotonic()
            await wait_until(lambda: tg.sent, 60, "answered by another", cluster.tails)
            return tg.sent[0].time - killed


@asynccontextmanager
async def database() -> AsyncIterator[str]:
    """A fresh database on the tests' server (CHATGATE_TEST_DATABASE_URL, else 127.0.0.1:5432)."""
    try:
        async with fresh_database() as url:
            yield url
    except BaseException as exc:  # pytest's skip or fail, outside pytest: say what is missing
        if type(exc).__module__.startswith("_pytest"):
            raise RuntimeError(str(exc)) from None
        raise


async def run(quick: bool) -> list[Figure]:
    try:
        return await _run(quick)
    finally:
        await drop_made()


async def _run(quick: bool) -> list[Figure]:
    chats = 200 if quick else 1000
    figures: list[Figure] = []
    times: dict[int, float] = {}
    for count in (1, 2, 3):
        async with database() as url:
            took, answered, sent, bots, fakes = await burst(url, count, chats)
        times[count] = took
        figures.append(Figure(NAME, f"burst of {chats} chats, {count} instance{'s' if count > 1 else ''}", took, "s",
                              note=f"{answered} chats answered, {sent} answers; CPU: instances {bots:.1f} s, "
                                   f"fakes and balancer {fakes:.1f} s"))
    figures.append(Figure(NAME, "burst: two instances vs one (times faster)", times[1] / times[2], "",
                          Goal(">=", 1.7)))
    figures.append(Figure(NAME, "burst: three instances vs one (times faster)", times[1] / times[3], ""))
    async with database() as url:
        stops = await stop_latency(url, 6 if quick else 20)
    p = percentiles(stops)
    figures += [Figure(NAME, "/stop across instances: to model stream closed, median", statistics.median(stops),
                       "ms"),
                Figure(NAME, "/stop across instances: p99", p.get("p99", max(stops)), "ms", Goal("<", 100))]
    messages = 60 if quick else 200
    async with database() as url:
        pg = await cpu_per_message(url, messages)
    sqlite = await cpu_per_message(None, messages)
    figures += [Figure(NAME, "bot CPU per message on PostgreSQL", pg, "ms"),
                Figure(NAME, "bot CPU per message on SQLite (same harness)", sqlite, "ms")]
    async with database() as url:
        figures.append(Figure(NAME, "SIGKILL mid-answer: another instance delivers after", await takeover(url), "s",
                              note="cluster.lease_seconds 3"))
    return figures
