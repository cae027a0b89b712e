"""dashboard: what the operator dashboard costs the bot with a page open and 20 runs live, and
how soon a run's row shows on the live page."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import statistics
import time

import aiohttp

from bench.common import JSON, Stack, percentiles, running_stack
from bench.report import Figure, Goal
from bot.web import passwords

NAME = "dashboard"
HOW = ("The fake LLM streams every answer (40 tokens over 1 s); 20 chats each send their next DM as soon as "
       "the previous answer arrived, so 20 runs are live all the time; 400 messages (quick: 120) per round, in 20 "
       "new chats (after one unmeasured message each). Two stacks (fakes and bot) run side by side, so that both "
       "bots see the same load on the machine: one bot without the dashboard, one with dashboard.enabled and a "
       "page open (logged in, /live loaded, its event stream read as Chromium would). CPU = the bot process's "
       "user+system time (/proc) per message; added = the median over 4 rounds (quick: 1), the stacks taking "
       "turns with the dashboard, of with / without - 1 in the same round. Below it, the dashboard's own work, "
       "measured alone in this process. Row latency = when the stream delivered the first update holding a run, "
       "minus that run's start (the run.started event, stamped by the bot in the row), both time.time() on this "
       "machine.")
CHATS = 20
TOKENS, SECONDS = 40, 1.0
FIRST_CHAT = 7000
USER, PASSWORD = "bench", "bench-dashboard-password"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _phase(stack: Stack, first_chat: int, messages: int) -> float:
    """One warm-up DM in each of CHATS new chats (fresh sessions: every phase starts from the same
    history), then ``messages`` DMs over them, each chat waiting for its answer; the bot's CPU
    seconds for those."""
    assert stack.bot is not None
    chats = range(first_chat, first_chat + CHATS)
    await asyncio.gather(*(stack.ask(chat, "warm up", timeout=30) for chat in chats))
    per_chat = [messages // CHATS + (i < messages % CHATS) for i in range(CHATS)]

    async def converse(chat: int, count: int) -> None:
        for i in range(count):
            await stack.ask(chat, f"message {i}", timeout=30)

    cpu = stack.bot.cpu_seconds()
    await asyncio.gather(*(converse(chat, n) for chat, n in zip(chats, per_chat)))
    return stack.bot.cpu_seconds() - cpu


class Page:
    """A logged-in browser's live page: /live loaded once, then its event stream read."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.first_seen: dict[str, float] = {}  # run id -> when the stream first showed it
        self.started: dict[str, float] = {}  # run id -> its start, as the row says
        self.updates = 0
        self._http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        self._reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        login = await self._http.post(f"{self.url}/login", data={"user": USER, "password": PASSWORD},
                                      headers={"Origin": self.url}, allow_redirects=False)
        if login.status != 303:
            raise RuntimeError(f"dashboard login failed: {login.status} {await login.text()}")
        page = await (await self._http.get(f"{self.url}/live")).text()
        for asset in re.findall(r'(?:href|src)="(/static/[^"]+)"', page):
            await (await self._http.get(f"{self.url}{asset}")).read()
        feed = await self._http.get(f"{self.url}/live/events", timeout=aiohttp.ClientTimeout(total=None),
                                    headers={"Sec-Fetch-Site": "same-origin", "Accept": "text/event-stream"})
        self._reader = asyncio.create_task(self._read(feed), name="dashboard page")

    async def _read(self, feed: aiohttp.ClientResponse) -> None:
        event = ""
        async for raw in feed.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "runs":
                now = time.time()
                self.updates += 1
                for row in json.loads(line[6:])["runs"]:
                    if row["run_id"] not in self.first_seen and row["state"] == "running":
                        self.first_seen[row["run_id"]] = now
                        self.started[row["run_id"]] = row["started_at"]

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait({self._reader})
        await self._http.close()


async def run(quick: bool) -> list[Figure]:
    messages, rounds = (120, 1) if quick else (400, 4)
    port = _free_port()
    dashboard: JSON = {"dashboard": {"enabled": True, "bind": f"127.0.0.1:{port}", "users": {USER: {
        "role": "viewer", "password_hash": passwords.hash_password(PASSWORD, n=passwords.MIN_N)}}}}
    off: list[float] = []
    on: list[float] = []
    latencies: list[float] = []
    runs_seen = updates = 0
    args = ("--tokens", str(TOKENS), "--stream-seconds", str(SECONDS))
    async with running_stack(*args) as first, running_stack(*args) as second:
        for r in range(rounds):  # the two stacks take turns with the dashboard
            plain, shown = (first, second) if r % 2 == 0 else (second, first)
            await plain.start_bot()
            await shown.start_bot(extra=dashboard)
            page = Page(f"http://127.0.0.1:{port}")
            await page.open()
            chats = FIRST_CHAT + 100 * r
            try:
                cpu_off, cpu_on = await asyncio.gather(_phase(plain, chats, messages), _phase(shown, chats, messages))
                await asyncio.sleep(0.3)
            finally:
                await page.close()
            off.append(cpu_off / messages)
            on.append(cpu_on / messages)
            latencies += [page.first_seen[run_id] - page.started[run_id] for run_id in page.first_seen]
            runs_seen += len(page.first_seen)
            updates += page.updates
    added = statistics.median(b / a - 1 for a, b in zip(off, on))
    update, event = await _update_cost()
    p = percentiles(latencies) if latencies else {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    total = (messages + CHATS) * rounds
    per_message = updates / total
    return [
        Figure(NAME, f"bot CPU per message, dashboard off ({CHATS} runs live)", statistics.median(off) * 1000, "ms"),
        Figure(NAME, "bot CPU per message, dashboard on and a page open", statistics.median(on) * 1000, "ms"),
        Figure(NAME, "added CPU per message with a page open", added * 100, "%", Goal("<", 5),
               note="per round (on / off - 1): " + ", ".join(f"{(b / a - 1) * 100:+.1f} %" for a, b in zip(off, on))),
        Figure(NAME, f"one live update alone: {CHATS} runs' rows and their JSON", update * 1e6, "µs"),
        Figure(NAME, "one run event alone (a streamed chunk, dropped at once)", event * 1e6, "µs"),
        Figure(NAME, "the dashboard's own work per message (its updates and the events of a run)",
               (per_message * update + (TOKENS + 4) * event) * 1e6, "µs"),
        Figure(NAME, f"run start to its row on the live page, median ({len(latencies)} runs)", p["p50"] * 1000,
               "ms"),
        Figure(NAME, "run start to its row on the live page, p99", p["p99"] * 1000, "ms", Goal("<", 500)),
        Figure(NAME, "runs the page showed, of those started", runs_seen, note=f"of {total}"),
        Figure(NAME, "live page updates per message", per_message),
    ]


async def _update_cost() -> tuple[float, float]:
    """CPU seconds of one update of the live page with CHATS runs (the board's snapshot and its
    JSON) and of one streamed chunk's event reaching the board, measured alone in this process."""
    from bot.agent.events import EventBus, EventKind, RunEvent
    from bot.conversation import Conversation
    from bot.dashboard.live import LiveBoard
    from bot.dashboard.sources import Bot
    from bot.messages import ChatType, InboundMessage, Sender
    from bot.runs import ActiveRun, Pending

    class Registry:
        def __init__(self) -> None:
            self.active: list[ActiveRun] = []

        def runs(self) -> list[ActiveRun]:
            return list(self.active)

    async def never(run_id: str) -> bool:
        return False

    bus, registry = EventBus(), Registry()
    board = LiveBoard(Bot(bus, registry, lambda key: 0, never, {}, "fake-model"))
    board.start()
    for i in range(CHATS):
        user = str(FIRST_CHAT + i)
        conversation = Conversation.of_key(f"agent:main:telegram:dm:{user}")
        msg = InboundMessage("telegram", "bot", user, ChatType.DM, Sender(user, f"User {user}"), "hi", f"m{i}")
        pending = Pending(msg, i, conversation=conversation)
        registry.active.append(ActiveRun(f"run{i}", conversation.session_key, (pending,)))
        await bus.emit(RunEvent(EventKind.STARTED, f"run{i}", conversation))
    board.payload()
    n = 2000
    started = time.process_time()
    for _ in range(n):
        board.payload()
    update = (time.process_time() - started) / n
    chunk = RunEvent(EventKind.DELTA, "run0", conversation, "tok ")
    started = time.process_time()
    for _ in range(n * 20):
        board.on_event(chunk)
    event = (time.process_time() - started) / (n * 20)
    board.close()
    return update, event
