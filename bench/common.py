"""What both benchmarks share: the fake LLM in a child process, the bot with a timing
adapter, percentiles, a table, and the process's memory and CPU."""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from bot.agent.events import RunEvent
from bot.app import App
from bot.config import Config, load_config
from bot.messages import InboundMessage, OutboundReply
from tests.fakes.channel import RecordingAdapter
from tests.fakes.llm_server import Reply

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = "telegram"  # a real platform name, so its access policy (dm_policy: open) applies
START_TIMEOUT = 10.0


class FakeLLMProcess:
    """``python -m tests.fakes.llm_server`` in a child process:

        async with FakeLLMProcess("--control") as llm:
            await llm.script(Reply.hang())
            ... the bot at llm.openai_base_url ...
            seen = await llm.request(0); gone = await llm.disconnected(0)

    With ``--control``, ``request`` and ``disconnected`` give the ``time.monotonic()`` at
    which the fake saw request *n* arrive and its client go away (one clock for every
    process on the machine)."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.base_url = ""
        self._seen: dict[str, dict[int, float]] = {"request": {}, "disconnected": {}}
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
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.fakes.llm_server", "--port", "0", *self.args, cwd=ROOT,
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
                    kind = "request" if "request" in report else "disconnected"
                    self._seen[kind][report[kind]] = report["at"]
                self._changed.notify_all()

    async def _close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait({self._reader})
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            await self._proc.wait()


@dataclass(frozen=True, slots=True)
class Seen:
    at: float  # time.monotonic()
    text: str


class TimingAdapter(RecordingAdapter):
    """A RecordingAdapter that notes when each reply was handed to it and lets a caller
    wait for the next reply or event in one chat. ``keep_events=False`` counts progress
    events instead of keeping them, so a big run does not inflate the bot's memory."""

    def __init__(self, platform: str = PLATFORM, *, keep_events: bool = True) -> None:
        super().__init__(platform)
        self.keep_events = keep_events
        self.sent_at: list[float] = []
        self.shown = 0
        self._expected: dict[tuple[str, str], tuple[str | None, asyncio.Future[Seen]]] = {}

    def expect(self, chat_id: str, kind: str, text: str | None = None) -> asyncio.Future[Seen]:
        """The next ``kind`` in the chat: ``"send"`` (a reply) or an event kind, with ``text`` if given."""
        future: asyncio.Future[Seen] = asyncio.get_running_loop().create_future()
        self._expected[(chat_id, kind)] = (text, future)
        return future

    async def send(self, reply: OutboundReply) -> str | None:
        self.sent_at.append(self._mark(reply.chat_id, "send", reply.text))
        return await super().send(reply)

    async def show(self, event: RunEvent, inbound: InboundMessage) -> None:
        self._mark(inbound.chat_id, event.kind, event.text)
        self.shown += 1
        if self.keep_events:
            await super().show(event, inbound)

    def _mark(self, chat_id: str, kind: str, text: str) -> float:
        now = time.monotonic()
        wanted = self._expected.get((chat_id, kind))
        if wanted is not None and wanted[0] in (None, text):
            del self._expected[(chat_id, kind)]
            if not wanted[1].done():
                wanted[1].set_result(Seen(now, text))
        return now


def bot_config(tmp: Path, openai_base_url: str, extra: str = "") -> Config:
    path = tmp / "config.yaml"
    path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: bench-key, base_url: "{openai_base_url}"}}}}
storage: {{path: "{tmp / 'chatgate.db'}"}}
workspace: {{root: "{tmp / 'workspaces'}"}}
channels: {{{PLATFORM}: {{dm_policy: open}}}}
{extra}
""")
    return load_config(path, env={})


@asynccontextmanager
async def running_bot(fake_args: Sequence[str], extra_config: str = "", *,
                      keep_events: bool = True) -> AsyncIterator[tuple[FakeLLMProcess, App, TimingAdapter]]:
    """The fake LLM in a child process, and the whole bot in this one, in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-") as tmp:
        async with FakeLLMProcess(*fake_args) as llm:
            channel = TimingAdapter(keep_events=keep_events)
            async with App(bot_config(Path(tmp), llm.openai_base_url, extra_config), {PLATFORM: channel}) as app:
                yield llm, app, channel


# ----------------------------------------------------------------------------- figures


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 (nearest rank) and max of a non-empty sample."""
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": ordered[-1]}


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns sized to fit; the first left-aligned, the others right-aligned."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in cells)


def verdict(value: float | None, goal: float) -> str:
    return "n/a" if value is None else ("met" if value < goal else "MISSED")


def rss_mb() -> float:
    """This process's resident memory now (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of this process (all its threads), or of another one."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
