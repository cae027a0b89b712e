"""cluster: several instances on one PostgreSQL database (needs a server, as the tests find it)."""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

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
       "three: seconds from the first post to the last answer, each chat answered exactly once; CPU seconds of the "
       "instances, of their PostgreSQL backends (when the server is on this machine) and of the bench process, and "
       "how busy the machine's cores were (other processes included). Ceiling: the most N instances could gain on "
       "these cores, if one instance is held up by its own core (its CPU time) and N by all the CPU of the "
       "one-instance burst spread over the cores: cores x instance CPU / all that CPU, at most N. /stop across "
       "instances: a long answer streams on one instance, /stop is posted so that another receives it; time from "
       "the post to the model stream closed, 20 tries (quick: 6). CPU per message: one instance, 200 (quick: 60) "
       "DMs one at a time, the bot process's CPU, on PostgreSQL and on SQLite. Takeover: the instance streaming an "
       "answer is SIGKILLed (cluster.lease_seconds 3; default 15), time until another delivers it. Talk: 20 chats "
       "converse at once (each chat's next DM once its answer came; quick: 5 DMs per chat, else 20) after one "
       "unmeasured DM per chat, one instance vs two behind the balancer (round-robin: half of a chat's DMs reach "
       "the instance that does not hold its lane and are handed over) vs two with each chat posted to one "
       "instance's webhook (no hand-over) vs two separate bots, each on a database of its own, each chat posted "
       "to one (two processes on these cores, no cluster: against it, what the cluster's coordination costs); "
       "CPU of the instances and of their PostgreSQL backends per message, and two against one.")


PARTS = ("burst", "stop", "cpu", "takeover", "talk")


def parts() -> tuple[str, ...]:
    """The parts to run: BENCH_CLUSTER=burst (or a comma list of PARTS) runs only those."""
    chosen = tuple(p.strip() for p in os.environ.get("BENCH_CLUSTER", "").split(",") if p.strip())
    unknown = set(chosen) - set(PARTS)
    if unknown:
        raise ValueError(f"BENCH_CLUSTER: unknown part {', '.join(sorted(unknown))} (parts: {', '.join(PARTS)})")
    return chosen or PARTS


@dataclass(frozen=True, slots=True)
class Burst:
    took: float  # seconds from the first post to the last answer
    answered: int  # distinct chats answered
    sent: int  # answers sent
    instances: float  # CPU seconds of the instances
    postgres: float | None  # of their PostgreSQL backends (None: the server is not on this machine)
    fakes: float  # of this process: the fakes and the balancer
    busy: float  # of all the machine's cores during the burst, how busy (0..1)

    @property
    def cpu(self) -> float:
        return self.instances + (self.postgres or 0.0) + self.fakes

    def ceiling(self, count: int) -> float:
        """The most ``count`` instances could gain over this one-instance burst on this machine's cores: it
        takes at least its instance's CPU time (one event loop, one core), and ``count`` instances at least
        the whole CPU it used spread evenly over the cores (none lost to other processes)."""
        return min(float(count), self.instances * (os.cpu_count() or 1) / self.cpu)


def _cpu_of(pids: list[int]) -> dict[int, float]:
    """CPU seconds of the processes still there."""
    cpu: dict[int, float] = {}
    for pid in pids:
        try:
            cpu[pid] = cpu_seconds(pid)
        except OSError:
            continue  # gone
    return cpu


def _machine() -> tuple[float, float]:
    """(all cores' jiffies, idle ones) from /proc/stat."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return float(sum(fields)), float(fields[3] + fields[4])


async def _backends(url: str, *, mine: bool = False) -> list[int]:
    """The server's processes serving this database (``mine``: the one serving this question), those on
    this machine (none when the server is elsewhere)."""
    conn = await asyncpg.connect(url)
    try:
        pids = [int(r[0]) for r in await conn.fetch(
            "SELECT pg_backend_pid()" if mine else
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]
        return [pid for pid in pids if _is_postgres(pid)]
    finally:
        await conn.close()


def _is_postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"postgres")
    except OSError:
        return False


async def burst(url: str, count: int, chats: int) -> Burst:
    """``chats`` DMs over ``count`` instances. The updates are posted the way Telegram does (to the balancer,
    with the secret token), over one client session: a session (and a connection) per post cost the bench
    process about 1 s more CPU per 1,000 posts, taken from the cores the instances run on."""
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
                Instances(Path(tmp), url, llm, tg, count, lease_seconds=15) as cluster, \
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
            await cluster.start()
            assert tg.webhook is not None
            hook = tg.webhook.url.replace("https://", "http://", 1)
            headers = {"X-Telegram-Bot-Api-Secret-Token": tg.webhook.secret_token or ""}
            gate = asyncio.Semaphore(50)

            async def post(chat: int) -> None:
                async with gate, session.post(hook, json=tg.message(chat, f"hello {chat}", user_id=chat),
                                              headers=headers) as response:
                    await response.read()
                    assert response.status == 200, response.status

            pids = [i.proc.pid for i in cluster.items if i.proc is not None]
            local = bool(await _backends(url, mine=True))
            cpu = sum(cpu_seconds(pid) for pid in pids), _cpu_of(await _backends(url)), cpu_seconds(), _machine()
            started = time.monotonic()
            await asyncio.gather(*(post(5000 + n) for n in range(chats)))
            await wait_until(lambda: len(tg.sent) >= chats, 300, "every chat answered", cluster.tails)
            took = max(s.time for s in tg.sent) - started
            machine = _machine()
            instances = sum(cpu_seconds(pid) for pid in pids) - cpu[0]
            fakes = cpu_seconds() - cpu[2]
            # the pools' connections (pools grow in a burst: a backend born meanwhile counts whole)
            after = _cpu_of(await _backends(url))
            postgres = sum(t - cpu[1].get(pid, 0.0) for pid, t in after.items()) if local else None
            busy = 1.0 - (machine[1] - cpu[3][1]) / max(machine[0] - cpu[3][0], 1.0)
            await asyncio.sleep(1.0)
            return Burst(took, len({s.chat_id for s in tg.sent}), len(tg.sent), instances, postgres, fakes, busy)


async def talk(urls: list[str], count: int, chats: int, per_chat: int, *,
               sticky: bool = False) -> tuple[float, float | None]:
    """``chats`` conversations of ``per_chat`` DMs at once over ``count`` instances on the database at
    ``urls[0]`` (or, given two, one instance on each: two separate bots, no cluster between them): (CPU
    seconds of the instances, of their PostgreSQL backends or None when the server is elsewhere) per
    message. ``sticky``: a chat's DMs always reach the same instance (posted to its webhook, not the
    balancer; always so with two databases)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, AsyncExitStack() as stack, \
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
            groups: list[Instances] = []
            for n, url in enumerate(urls):
                (Path(tmp) / str(n)).mkdir()
                groups.append(await stack.enter_async_context(
                    Instances(Path(tmp) / str(n), url, llm, tg, count if len(urls) == 1 else 1, lease_seconds=15)))
                await groups[-1].start()
            items = [item for group in groups for item in group.items]
            ids = [5000 + n for n in range(chats)]
            assert tg.webhook is not None
            headers = {"X-Telegram-Bot-Api-Secret-Token": tg.webhook.secret_token or ""}

            def answered(chat: int) -> int:
                return sum(1 for s in tg.sent if s.chat_id == chat)

            def tails() -> str:
                return "\n".join(group.tails() for group in groups)

            async def post(chat: int, update: dict[str, Any]) -> int:
                if not sticky and len(groups) == 1:
                    return await groups[0].post(update)
                port = items[chat % len(items)].port
                async with session.post(f"http://127.0.0.1:{port}/telegram", json=update, headers=headers) as response:
                    await response.read()
                    return response.status

            async def converse(chat: int, first: int, messages: int) -> None:
                for n in range(first, first + messages):
                    assert await post(chat, tg.message(chat, f"message {n}", user_id=chat)) == 200
                    await wait_until(lambda: answered(chat) > n, 60, "answered", tails)  # noqa: B023

            async def backends() -> dict[int, float]:
                return {pid: cpu for url in urls for pid, cpu in _cpu_of(await _backends(url)).items()}

            await asyncio.gather(*(converse(chat, 0, 1) for chat in ids))  # sessions made, lanes taken
            pids = [i.proc.pid for i in items if i.proc is not None]
            local = bool(await _backends(urls[0], mine=True))
            before = sum(cpu_seconds(pid) for pid in pids), await backends()
            await asyncio.gather(*(converse(chat, 1, per_chat) for chat in ids))
            instances = sum(cpu_seconds(pid) for pid in pids) - before[0]
            after = await backends()
            postgres = sum(t - before[1].get(pid, 0.0) for pid, t in after.items()) if local else None
            n = chats * per_chat
            return instances / n, (postgres / n if postgres is not None else None)


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
    chosen = parts()
    figures: list[Figure] = []
    if "burst" in chosen:
        figures += await _bursts(200 if quick else 1000)
    if "stop" in chosen:
        figures += await _stops(quick)
    if "cpu" in chosen:
        figures += await _cpu(quick)
    if "talk" in chosen:
        figures += await _talks(5 if quick else 20)
    if "takeover" in chosen:
        async with database() as url:
            figures.append(Figure(NAME, "SIGKILL mid-answer: another instance delivers after", await takeover(url),
                                  "s", note="cluster.lease_seconds 3"))
    return figures


async def _bursts(chats: int) -> list[Figure]:
    figures: list[Figure] = []
    runs: dict[int, Burst] = {}
    for count in (1, 2, 3):
        async with database() as url:
            b = runs[count] = await burst(url, count, chats)
        postgres = f"{b.postgres:.1f} s" if b.postgres is not None else "not on this machine"
        figures.append(Figure(NAME, f"burst of {chats} chats, {count} instance{'s' if count > 1 else ''}", b.took, "s",
                              note=f"{b.answered} chats answered, {b.sent} answers; CPU: instances {b.instances:.1f} s"
                                   f", PostgreSQL {postgres}, fakes and balancer {b.fakes:.1f} s; cores "
                                   f"{b.busy:.0%} busy" + (f", the instance {b.instances / b.took:.0%}" if count == 1
                                                           else "")))
    one = runs[1]
    figures.append(Figure(NAME, "burst: two instances vs one (times faster)", one.took / runs[2].took, "",
                          Goal(">=", 1.7), note=f"ceiling on {os.cpu_count()} cores: {one.ceiling(2):.2f}"))
    figures.append(Figure(NAME, "burst: three instances vs one (times faster)", one.took / runs[3].took, "",
                          note=f"ceiling on {os.cpu_count()} cores: {one.ceiling(3):.2f}"))
    return figures


async def _talks(per_chat: int) -> list[Figure]:
    figures: list[Figure] = []
    total: dict[str, float] = {}
    for key, count, sticky, label in (
            ("one", 1, False, "1 instance"), ("rr", 2, False, "2 instances, round-robin"),
            ("sticky", 2, True, "2 instances, each chat on one"),
            ("apart", 2, True, "2 separate bots (a database each), each chat on one")):
        async with database() as url, (database() if key == "apart" else nullcontext(url)) as other:
            urls = [url, other] if key == "apart" else [url]
            instances, postgres = await talk(urls, count, 20, per_chat, sticky=sticky)
        total[key] = instances + (postgres or 0.0)
        where = f", PostgreSQL {postgres * 1000:.2f} ms" if postgres is not None else ", PostgreSQL elsewhere"
        figures.append(Figure(NAME, f"talk, {label}: CPU per message", total[key] * 1000, "ms",
                              note=f"instances {instances * 1000:.2f} ms{where}"))
    one = total["one"]
    figures.append(Figure(NAME, "talk: CPU per message, two instances (round-robin) vs one", total["rr"] / one,
                          "x", Goal("<=", 1.10), note="half the DMs reach the instance without the chat's lane"))
    figures.append(Figure(NAME, "talk: CPU per message, two instances (each chat on one) vs one",
                          total["sticky"] / one, "x", Goal("<=", 1.10), note="coordination without hand-overs"))
    figures.append(Figure(NAME, "talk: CPU per message, two instances (each chat on one) vs two separate bots",
                          total["sticky"] / total["apart"], "x", Goal("<=", 1.10),
                          note="what the cluster adds to two processes on these cores"))
    return figures


async def _stops(quick: bool) -> list[Figure]:
    async with database() as url:
        stops = await stop_latency(url, 6 if quick else 20)
    p = percentiles(stops)
    return [Figure(NAME, "/stop across instances: to model stream closed, median", statistics.median(stops), "ms"),
            Figure(NAME, "/stop across instances: p99", p.get("p99", max(stops)), "ms", Goal("<", 100))]


async def _cpu(quick: bool) -> list[Figure]:
    messages = 60 if quick else 200
    async with database() as url:
        pg = await cpu_per_message(url, messages)
    sqlite = await cpu_per_message(None, messages)
    return [Figure(NAME, "bot CPU per message on PostgreSQL", pg, "ms"),
            Figure(NAME, "bot CPU per message on SQLite (same harness)", sqlite, "ms")]
