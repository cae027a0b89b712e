"""chatgate and nanobot (HKUDS/nanobot) side by side on the same fakes (issue 40).

    python -m bench.peer --nanobot /work/peers/nanobot --python /work/peers/nb-venv/bin/python [--rounds 2]

Each round measures both bots, the first of them alternating from round to round, each on a
fresh pair of chatgate's fakes (the fake LLM answering the echo at once, the fake Telegram Bot
API): 20 chats x 10 DMs, each chat sequential and all chats at once, after one unmeasured
warm-up DM per chat. Measured per bot: its process's CPU (user + system from /proc/PID/stat,
its children's included) over the measured DMs / their number, and the median latency from
the push of a DM to the fake recording the answer's sendMessage.

nanobot runs as its gateway (``nanobot gateway --foreground``) from its own virtualenv, with
its Telegram channel polling; it has no setting for another Bot API server, so a small
launcher sets python-telegram-bot's ``base_url`` and ``base_file_url`` on the application
builder before nanobot builds its app. Turned off in its config: streaming (chatgate's
streaming is off too), the reaction emoji, progress and tool hints, heartbeat, Dream and
transcription. nanobot's code is not part of chatgate: give its checkout with --nanobot.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import TELEGRAM_TOKEN, Stack, _end, percentiles, running_stack, table

CHATS, DMS = 20, 10
ASK_TIMEOUT = 300.0  # nanobot answers 20 chats at once ~1.5 messages a second: a DM may wait ~15 s
FIRST_CHAT = 1000
LAUNCHER = """\
import runpy, sys
from telegram.ext import ApplicationBuilder
api_root = sys.argv.pop(1)
build = ApplicationBuilder.build
def pointed(self):
    self.base_url(api_root + "/bot").base_file_url(api_root + "/file/bot")
    return build(self)
ApplicationBuilder.build = pointed
sys.argv[0] = "nanobot"
runpy.run_module("nanobot", run_name="__main__", alter_sys=True)
"""


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, of its children it waited for, and of its live descendants."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                total += tree_cpu_seconds(int(child))
            except OSError:
                continue
    return total


@dataclass
class Result:
    bot: str
    cpu_ms: float  # per message
    median_ms: float
    p90_ms: float
    messages: int
    unanswered_text: int  # answers that do not contain the DM's text (the fake LLM echoes it)


class Nanobot:
    """``nanobot gateway`` in its own virtualenv, configured for the stack's fakes."""

    def __init__(self, stack: Stack, checkout: Path, python: str) -> None:
        self.stack, self.checkout, self.python = stack, checkout, python
        self.log = stack.tmp / "nanobot.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def config(self) -> Path:
        home = self.stack.tmp / "nanobot-home"
        home.mkdir(exist_ok=True)
        config = {
            "agents": {"defaults": {"workspace": str(self.stack.tmp / "nanobot-workspace"), "model": "fake-model",
                                    "provider": "custom", "maxTokens": 1024, "timezone": "UTC",
                                    "timezoneMode": "manual", "dream": {"enabled": False}}},
            "providers": {"custom": {"apiKey": "bench-key", "apiBase": self.stack.llm.openai_base_url}},
            "channels": {"sendProgress": False, "sendToolHints": False, "showReasoning": False,
                         "telegram": {"enabled": True, "token": TELEGRAM_TOKEN, "allowFrom": ["*"],
                                      "groupPolicy": "open", "streaming": False, "reactEmoji": ""},
                         "websocket": {"enabled": False, "port": _free_port()}},
            "transcription": {"enabled": False},
            "gateway": {"port": _free_port(), "heartbeat": {"enabled": False}},
            "api": {"port": _free_port()},
        }
        path = home / "config.json"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start(self, timeout: float = 60.0) -> None:
        config = self.config()
        since = len(await self.stack.tg.calls("getUpdates"))
        env = {**os.environ, "HOME": str(config.parent)}
        env.pop("PYTHONPATH", None)
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                self.python, "-c", LAUNCHER, self.stack.tg.api_root, "gateway", "--foreground", "-c", str(config),
                cwd=self.stack.tmp, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while not await self.stack.tg.calls("getUpdates", since, wait=0.5):
            if self.proc.returncode is not None or time.monotonic() > deadline:
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
                raise RuntimeError(f"nanobot did not start polling (exit code {self.proc.returncode}):\n{tail}")

    async def stop(self) -> None:
        await _end(self.proc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def measure(bot: str, nanobot: Path, python: str) -> Result:
    async with running_stack() as stack:
        if bot == "chatgate":
            pid = (await stack.start_bot()).pid
            stop = stack.stop_bot
        else:
            peer = Nanobot(stack, nanobot, python)
            try:
                await peer.start()
            except BaseException:
                await peer.stop()
                raise
            pid, stop = peer.pid, peer.stop
        try:
            return await _converse(stack, bot, pid)
        finally:
            await stop()


async def _converse(stack: Stack, bot: str, pid: int) -> Result:
    ids = [FIRST_CHAT + i for i in range(CHATS)]
    await asyncio.gather(*(stack.ask(chat, "warm up", timeout=ASK_TIMEOUT) for chat in ids))
    latencies: list[float] = []
    missing = 0

    async def chat(chat_id: int) -> None:
        nonlocal missing
        for i in range(DMS):
            text = f"at once {chat_id} {i}"
            pushed_at, reply = await stack.ask(chat_id, text, timeout=ASK_TIMEOUT)
            latencies.append(reply["time"] - pushed_at)
            missing += text not in (reply.get("plain") or "")

    cpu = tree_cpu_seconds(pid)
    await asyncio.gather(*(chat(c) for c in ids))
    cpu = tree_cpu_seconds(pid) - cpu
    p = percentiles(latencies)
    return Result(bot, cpu * 1000 / len(latencies), p["p50"] * 1000, p["p90"] * 1000, len(latencies), missing)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanobot", type=Path, required=True, help="nanobot's checkout (installed in --python)")
    parser.add_argument("--python", required=True, help="the python of nanobot's virtualenv")
    parser.add_argument("--rounds", type=int, default=2, help="each measures both bots; the first alternates")
    args = parser.parse_args(argv)
    rows: list[tuple[object, ...]] = []
    ratios: dict[str, list[float]] = {"cpu": [], "latency": []}
    for n in range(args.rounds):
        order = ("chatgate", "nanobot") if n % 2 == 0 else ("nanobot", "chatgate")
        load = os.getloadavg()[0]
        results = {bot: await measure(bot, args.nanobot, args.python) for bot in order}
        for bot in order:
            r = results[bot]
            rows.append((n + 1, bot, f"{r.cpu_ms:.2f}", f"{r.median_ms:.1f}", f"{r.p90_ms:.1f}", r.messages,
                         r.unanswered_text, f"{load:.1f}"))
        ratios["cpu"].append(results["chatgate"].cpu_ms / results["nanobot"].cpu_ms)
        ratios["latency"].append(results["chatgate"].median_ms / results["nanobot"].median_ms)
        print(f"round {n + 1}: chatgate/nanobot CPU {ratios['cpu'][-1]:.3f} (1/{1 / ratios['cpu'][-1]:.1f}), "
              f"latency {ratios['latency'][-1]:.3f}", flush=True)
    print()
    print(table(("round", "bot", "CPU/msg ms", "median ms", "p90 ms", "msgs", "no echo", "load"), rows, left=2))
    cpu = statistics.median(ratios["cpu"])
    print(f"\nchatgate/nanobot, median over rounds: CPU per message {cpu:.3f} (1/{1 / cpu:.1f}), "
          f"median latency {statistics.median(ratios['latency']):.3f}")


def _cli() -> None:
    asyncio.run(main())


if __name__ == "__main__":
    _cli()

