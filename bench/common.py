"""Process management for the benchmarks: the fake LLM and the fake Telegram Bot API in
child processes, ``chatgate run`` in a third, what /proc says about a process, and
percentiles and a table for the figures.

    async with running_stack() as stack:              # both fakes, in a temp directory
        bot = await stack.start_bot(runs={"max_concurrent": 200})  # returns at its first getUpdates
        pushed_at, reply = await stack.ask(42, "hello")             # a DM, and its sendMessage record

Every child is stopped when the ``async with`` ends, also on an exception or Ctrl-C.
Times are ``time.monotonic()``, one clock for every process on the machine (Linux), so
a time the fake Telegram records can be compared with one the fake LLM reports.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.llm_server import Reply

ROOT = Path(__file__).resolve().parent.parent
# the chatgate whose bot is measured: this tree, or BENCH_BOT_TREE (another checkout: python -m bench.alternate);
# the harness and the fakes are always this tree's
BOT_TREE = Path(os.environ.get("BENCH_BOT_TREE") or ROOT).resolve()
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0  # SIGTERM, then SIGKILL after this long
TELEGRAM_TOKEN = "123456:BENCH-TOKEN"
JSON = dict[str, Any]


async def _spawn(module: str, *args: str, stdin: int | None = None, stdout: int | None = None,
                 stderr: Any = None, tree: Path = ROOT) -> asyncio.subprocess.Process:
    """``python -m module`` with ``tree``'s code first: its folder is the child's working directory
    (``sys.path[0]``), and on ``PYTHONPATH`` for the Python processes the child starts."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH")) if p)}
    return await asyncio.create_subprocess_exec(sys.executable, "-m", module, *args, cwd=tree, env=env, stdin=stdin,
                                                stdout=stdout, stderr=stderr, limit=1 << 22)


async def _end(proc: asyncio.subprocess.Process | None) -> None:
    """SIGTERM, and SIGKILL if it is still there after STOP_TIMEOUT."""
    if proc is None or proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def accepts(port: int, host: str = "127.0.0.1") -> bool:
    """Something listens on ``host:port`` (a bot's webhook, before it is driven)."""
    try:
        _, writer = await asyncio.open_connection(host, port)
    except OSError:
        return False
    writer.close()
    return True


async def settle(done: Callable[[], bool], progress: Callable[[], object], *, quiet: float, timeout: float,
                 interval: float = 0.02) -> bool:
    """Polls until ``done()`` (True), or until ``progress()`` has not changed for ``quiet``
    seconds or ``timeout`` seconds have passed (False)."""
    deadline = time.monotonic() + timeout
    last, changed_at = progress(), time.monotonic()
    while not done():
        now = time.monotonic()
        if now > deadline or now - changed_at > quiet:
            return False
        await asyncio.sleep(interval)
        if (current := progress()) != last:
            last, changed_at = current, time.monotonic()
    return True


# ----------------------------------------------------------------------------- fake LLM


class FakeLLMProcess:
    """``python -m tests.fakes.llm_server`` in a child process:

        async with FakeLLMProcess("--control") as llm:
            await llm.script(Reply.hang())
            ... the bot at llm.openai_base_url ...
            seen = await llm.request(0); gone = await llm.disconnected(0)

    With ``--control``, ``request``, ``first_token`` and ``disconnected`` give the
    ``time.monotonic()`` at which the fake saw request *n* arrive, wrote its first content
    chunk, and saw its client go away; ``reports`` holds every request's report (the last
    user text and the prompt tokens the fake reports as usage)."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.base_url = ""
        self.reports: list[JSON] = []  # by request index
        self._seen: dict[str, dict[int, float]] = {"request": {}, "first_token": {}, "disconnected": {}}
        self._acks = 0
        self._changed = asyncio.Condition()
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    async def __aenter__(self) -> FakeLLMProcess:
        self._proc = await _spawn("tests.fakes.llm_server", "--port", "0", *self.args,
                                  stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        try:
            assert self._proc.stdout is not None
            self.base_url = (await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT)).decode().strip()
            if not self.base_url.startswith("http://"):
                raise RuntimeError("the fake LLM did not start (see its error above)")
            self._reader = asyncio.create_task(self._read(), name="fake llm reports")
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests; returns once the fake has them."""
        assert self._proc is not None and self._proc.stdin is not None
        wanted = self._acks + 1
        self._proc.stdin.write(json.dumps([asdict(r) for r in replies]).encode() + b"\n")
        await self._proc.stdin.drain()
        await self._wait(lambda: self._acks >= wanted, START_TIMEOUT)

    async def request(self, index: int, timeout: float = 5.0) -> float:
        """When request ``index`` (counting from 0) reached the fake."""
        await self._wait(lambda: index in self._seen["request"], timeout)
        return self._seen["request"][index]

    async def first_token(self, index: int, timeout: float = 5.0) -> float:
        """When the first content chunk of the answer to request ``index`` was written."""
        await self._wait(lambda: index in self._seen["first_token"], timeout)
        return self._seen["first_token"][index]

    async def disconnected(self, index: int, timeout: float = 2.0) -> float | None:
        """When the client of request ``index`` went away; None if it did not within ``timeout``."""
        try:
            await self._wait(lambda: index in self._seen["disconnected"], timeout)
        except TimeoutError:
            return None
        return self._seen["disconnected"][index]

    async def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(ready)

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            report = json.loads(line)
            async with self._changed:
                if "scripted" in report:
                    self._acks += 1
                else:
                    kind = next(k for k in self._seen if k in report)
                    self._seen[kind][report[kind]] = report["at"]
                    if kind == "request":
                        self.reports.append(report)
                self._changed.notify_all()

    async def _close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait({self._reader})
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()  # with --control, end of input stops the fake
        await _end(self._proc)


# ----------------------------------------------------------------------------- fake Telegram


class FakeTelegramProcess:
    """``python -m tests.fakes.telegram_server`` in a child process, driven through its
    control API. Every message the bot sends is fetched as soon as the fake records it
    (a long poll) into ``sent`` and ``by_chat``: dicts with ``chat_id``, ``plain`` (the
    text as the user sees it), ``message_id`` and ``time``."""

    def __init__(self) -> None:
        self.api_root = ""
        self.sent: list[JSON] = []
        self.by_chat: dict[int, list[JSON]] = defaultdict(list)
        self._changed = asyncio.Condition()
        self._proc: asyncio.subprocess.Process | None = None
        self._http: aiohttp.ClientSession | None = None
        self._watcher: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    async def __aenter__(self) -> FakeTelegramProcess:
        self._proc = await _spawn("tests.fakes.telegram_server", "--port", "0", "--token", TELEGRAM_TOKEN,
                                  stdout=asyncio.subprocess.PIPE)
        try:
            assert self._proc.stdout is not None
            self.api_root = (await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT)).decode().strip()
            if not self.api_root.startswith("http://"):
                raise RuntimeError("the fake Telegram did not start (see its error above)")
            self._http = aiohttp.ClientSession(self.api_root, timeout=aiohttp.ClientTimeout(total=None),
                                               connector=aiohttp.TCPConnector(limit=0))
            self._watcher = asyncio.create_task(self._watch(), name="fake telegram sent")
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    @staticmethod
    def dm(chat_id: int, text: str) -> JSON:
        """A private message from user ``chat_id`` (the fake builds the Update)."""
        return {"chat_id": chat_id, "text": text}

    async def push(self, *messages: JSON) -> float:
        """Offers the messages to the bot's getUpdates at once; when the fake queued them."""
        return float((await self._call("POST", "/_control/push", json=list(messages)))["at"])

    async def fail_for(self, method: str, seconds: float, status: int = 502) -> float:
        """Every call of ``method`` fails with ``status`` for ``seconds`` (an outage); when it ends."""
        body = {"method": method, "seconds": seconds, "status": status}
        return float((await self._call("POST", "/_control/fail", json=body))["until"])

    async def sent_in(self, chat_id: int, count: int, timeout: float) -> list[JSON]:
        """The chat's first ``count`` sent messages, once there are that many."""
        await self._wait(lambda: len(self.by_chat[chat_id]) >= count, timeout)
        return self.by_chat[chat_id][:count]

    async def wait_sent(self, count: int, timeout: float) -> bool:
        """True once ``count`` messages were sent in all, False after ``timeout`` seconds."""
        try:
            await self._wait(lambda: len(self.sent) >= count, timeout)
        except TimeoutError:
            return False
        return True

    async def calls(self, method: str, since: int = 0, wait: float = 0.0) -> list[JSON]:
        """API calls of ``method`` from number ``since`` on; ``wait`` holds until there is one."""
        query = {"method": method, "since": since, "wait": wait}
        return (await self._call("GET", "/_control/calls", params=query))["result"]

    async def edits(self, since: int = 0) -> list[JSON]:
        """Successful editMessageText calls: ``chat_id``, ``message_id``, ``plain``, ``time``."""
        return (await self._call("GET", "/_control/edits", params={"since": since}))["result"]

    async def _call(self, method: str, path: str, **kw: Any) -> JSON:
        assert self._http is not None
        async with self._http.request(method, path, **kw) as response:
            body: JSON = await response.json()
        if not body.get("ok"):
            raise RuntimeError(f"fake Telegram {path}: {body}")
        return body

    async def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(ready)

    async def _watch(self) -> None:
        while True:
            query = {"since": len(self.sent), "wait": 30}
            records = (await self._call("GET", "/_control/sent", params=query))["result"]
            async with self._changed:
                for record in records:
                    self.sent.append(record)
                    self.by_chat[int(record["chat_id"])].append(record)
                self._changed.notify_all()

    async def _close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.wait({self._watcher})
        if self._http is not None:
            await self._http.close()
        await _end(self._proc)


# ----------------------------------------------------------------------------- the bot


class BotProcess:
    """``python -m bot run -c CONFIG`` in a child process, its stderr in ``log``."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config, self.log = config, log
        self.started_at = 0.0  # time.monotonic() just before the process was created
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def exited(self) -> int | None:
        return None if self._proc is None else self._proc.returncode

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.started_at = time.monotonic()
            args = ("bot", "run", "-c", str(self.config))
            if profile := os.environ.get("BENCH_PROFILE"):  # cProfile the bot: BENCH_PROFILE=/tmp/bot.prof
                args = ("cProfile", "-o", profile, "-m", *args)
            if counts := os.environ.get("BENCH_PG_STATEMENTS"):  # PostgreSQL statements sent: bench/pgcount.py
                args = ("bench.pgcount", counts, *args)
            self._proc = await _spawn(*args, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, tree=BOT_TREE)
        if spy := os.environ.get("BENCH_PYSPY"):  # sample the bot with py-spy: BENCH_PYSPY=/tmp/bot.txt
            self._spy = await asyncio.create_subprocess_exec(
                "py-spy", "record", "--format", "raw", "--rate", "1000", "--threads", "-o",
                f"{spy}.{self._proc.pid}", "-p", str(self._proc.pid), stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL)

    @asynccontextmanager
    async def sampled(self, name: str) -> AsyncIterator[None]:
        """With BENCH_PYSPY_PHASES=/tmp/prefix, py-spy samples the bot (raw stacks, idle left
        out) while the block runs, into ``/tmp/prefix.<name>.txt`` (``python -m bench.flame``
        lists its top entries); without it, nothing."""
        prefix = os.environ.get("BENCH_PYSPY_PHASES")
        if not prefix:
            yield
            return
        out = f"{prefix}.{name.replace(' ', '-')}.txt"
        spy = await asyncio.create_subprocess_exec(
            "py-spy", "record", "--format", "raw", "--rate", "1000", "--nonblocking", "-o", out,
            "-p", str(self.pid), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await asyncio.sleep(0.5)  # py-spy attaches
        try:
            yield
        finally:
            spy.send_signal(2)
            await spy.wait()

    async def stop(self) -> None:
        if (spy := getattr(self, "_spy", None)) is not None:
            spy.send_signal(2)
            await spy.wait()
        await _end(self._proc)

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_mb(self) -> float:
        return status_mb(self.pid, "VmRSS")

    def peak_rss_mb(self) -> float:
        return status_mb(self.pid, "VmHWM")


# ----------------------------------------------------------------------------- the stack


class Stack:
    """Both fakes, and the bot started (and restarted with another config) against them.
    The database and workspaces live in ``tmp`` and survive a restart."""

    def __init__(self, tmp: Path, llm: FakeLLMProcess, tg: FakeTelegramProcess) -> None:
        self.tmp, self.llm, self.tg = tmp, llm, tg
        self.db = tmp / "chatgate.db"
        self.workspaces = tmp / "workspaces"
        self.bot: BotProcess | None = None
        self.ready_at = 0.0  # when the bot last started polling: its first getUpdates reached the fake
        self._starts = 0

    def config(self, *, telegram: JSON | None = None, runs: JSON | None = None, extra: JSON | None = None) -> Path:
        """A config file for the fakes (JSON, which YAML reads); ``extra`` laid over it."""
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "bench-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.db)},
            "workspace": {"root": str(self.workspaces)},
            "channels": {"console": {"enabled": False},
                         "telegram": {"enabled": True, "token": TELEGRAM_TOKEN, "base_url": self.tg.api_root,
                                      "dm_policy": "open", "group_policy": "open", "streaming": "off",
                                      **(telegram or {})}},
            "runs": runs or {},
            # the scenarios measure the bot, not the per-person limiter (bench/limits.py does that):
            # one benchmark chat sends far more than a person's 20 messages a minute
            "limits": {"messages_per_minute": None},
            "logging": {"level": "WARNING"},
        }
        if extra:
            config = _merged(config, extra)
        if more := os.environ.get("BENCH_CONFIG"):  # e.g. '{"agent": {"compaction": {"enabled": false}}}'
            config = _merged(config, json.loads(more))
        self._starts += 1
        path = self.tmp / f"config-{self._starts}.yaml"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start_bot(self, *, telegram: JSON | None = None, runs: JSON | None = None, extra: JSON | None = None,
                        timeout: float = 15.0) -> BotProcess:
        """(Re)starts the bot; returns once it polls (its ``ready_at``: that first getUpdates)."""
        await self.stop_bot()
        since = len(await self.tg.calls("getUpdates"))
        self.bot = BotProcess(self.config(telegram=telegram, runs=runs, extra=extra), self.tmp / "bot.log")
        await self.bot.start()
        deadline = time.monotonic() + timeout
        while not (polls := await self.tg.calls("getUpdates", since, wait=0.5)):
            if self.bot.exited is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not start polling (exit code {self.bot.exited}):\n"
                                   f"{self.bot.log_tail()}")
        self.ready_at = float(polls[0]["time"])
        return self.bot

    async def stop_bot(self) -> None:
        bot, self.bot = self.bot, None
        if bot is not None:
            await bot.stop()

    async def ask(self, chat_id: int, text: str, timeout: float = 10.0) -> tuple[float, JSON]:
        """Sends a DM and waits for the chat's next sent message: (when pushed, its record)."""
        count = len(self.tg.by_chat[chat_id]) + 1
        pushed_at = await self.tg.push(self.tg.dm(chat_id, text))
        return pushed_at, (await self.tg.sent_in(chat_id, count, timeout))[-1]


def _merged(base: JSON, extra: JSON) -> JSON:
    """``base`` with ``extra`` laid over it, mappings merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@asynccontextmanager
async def running_stack(*llm_args: str) -> AsyncIterator[Stack]:
    """The fake LLM (``--control`` and ``llm_args``) and the fake Telegram in child
    processes, in a fresh directory; the bot is started with ``Stack.start_bot``."""
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-") as tmp:
        async with AsyncExitStack() as children:
            llm = await children.enter_async_context(FakeLLMProcess("--control", *llm_args))
            tg = await children.enter_async_context(FakeTelegramProcess())
            stack = Stack(Path(tmp), llm, tg)
            children.push_async_callback(stack.stop_bot)  # the bot goes first
            yield stack


# ----------------------------------------------------------------------------- /proc


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of this process (all its threads), or of another one."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def status_mb(pid: int | str, field: str) -> float:
    """A memory line of /proc/PID/status (VmRSS: resident now, VmHWM: its peak), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def rss_mb() -> float:
    """This process's resident memory now (VmRSS)."""
    return status_mb("self", "VmRSS")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


# ----------------------------------------------------------------------------- figures


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 (nearest rank) and max of a non-empty sample."""
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": ordered[-1]}


def table(header: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    """Columns sized to fit; the first ``left`` left-aligned, the others right-aligned."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i < left else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in cells)


def verdict(value: float | None, goal: float) -> str:
    return "n/a" if value is None else ("met" if value < goal else "MISSED")
