"""What the browser tool costs: Chromium's start to its first snapshot (cold and warm), the
memory of an open browser, /stop during a slow page, and the bot's CPU per message with the
browser capability on but unused.

The browser runs as the tool runs it (``ToolRegistry.execute``): in its bubblewrap sandbox,
behind the fence, against a fake site on 127.0.0.1 (``tests/fakes/sites.py``; the fence's
one hole is 127.0.0.1). Cold: a new Playwright driver and a new browser; warm: the driver
up, a new chat's browser; reopen: a page in a browser already open. Memory: the proportional
set size of every process of one browser's sandbox (shared pages counted once).

    python -m bench.browser [--runs 5] [--messages 200]

Timing is never asserted; the figures are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from ipaddress import IPv4Address
from pathlib import Path

from bench.common import cpu_seconds, percentiles, table
from bench.inprocess import running_bot
from bot.browser.browsers import Browsers
from bot.browser.config import BrowserSettings
from bot.browser.tool import browser_tool
from bot.conversation import Conversation
from bot.llm import ToolCall
from bot.tools.base import ToolContext
from bot.tools.netguard import IPAddress, address_refusal
from bot.tools.registry import ToolRegistry
from tests.fakes.channel import dm
from tests.fakes.sites import serving


def hole(ip: IPAddress) -> str | None:
    return None if ip == IPv4Address("127.0.0.1") else address_refusal(ip)


async def call(tools: ToolRegistry, root: Path, who: str, **arguments: object) -> float:
    workspace = root / who
    workspace.mkdir(exist_ok=True)
    ctx = ToolContext(workspace, Conversation.of_key(f"agent:main:bench:dm:{who}"), "r", "main", who)
    started = time.monotonic()
    [result] = await tools.execute([ToolCall("c", "browser", json.dumps(arguments))], ctx)
    if result.is_error:
        raise RuntimeError(result.content)
    return (time.monotonic() - started) * 1000


def sandbox_pss_mb(pid: int) -> float:
    """Proportional memory (shared pages split among their processes) of the sandbox's
    processes (pid 1 and its descendants), in MB."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


async def browser_figures(runs: int) -> list[list[str]]:
    rows: list[list[str]] = []
    cold: list[float] = []
    warm: list[float] = []
    reopen: list[float] = []
    memory: list[float] = []
    stops: list[float] = []
    async with serving() as sites:
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="chatgate-bench-browser-") as tmp:
                browsers = Browsers(BrowserSettings(), check=hole)
                tools = ToolRegistry()
                tools.register(browser_tool(browsers))
                try:
                    cold.append(await call(tools, Path(tmp), "a", action="open", url=sites.url("/form")))
                    warm.append(await call(tools, Path(tmp), "b", action="open", url=sites.url("/form")))
                    reopen.append(await call(tools, Path(tmp), "b", action="open", url=sites.url("/links")))
                    session = browsers.get("agent:main:bench:dm:b")
                    assert session is not None and session.jail.pid is not None
                    memory.append(sandbox_pss_mb(session.jail.pid))
                    sites.slow_gone.clear()
                    ctx_root = Path(tmp) / "b"
                    ctx = ToolContext(ctx_root, Conversation.of_key("agent:main:bench:dm:b"), "r", "main", "b")
                    task = asyncio.ensure_future(tools.execute(
                        [ToolCall("s", "browser", json.dumps({"action": "open", "url": sites.url("/slow")}))], ctx))
                    hits = sites.slow_hits
                    while sites.slow_hits == hits:
                        await asyncio.sleep(0.005)
                    stopped = time.monotonic()
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    await asyncio.wait_for(sites.slow_gone.wait(), 10)
                    stops.append((time.monotonic() - stopped) * 1000)
                finally:
                    await browsers.aclose()
    for label, values, unit in (("cold: driver and browser start, open, first snapshot", cold, "ms"),
                                ("warm: a new chat's browser (driver up), open, snapshot", warm, "ms"),
                                ("a page opened in an open browser, snapshot", reopen, "ms"),
                                ("/stop during a slow page: until the site sees it go", stops, "ms"),
                                ("memory of one open browser (PSS of its sandbox)", memory, "MB")):
        p = percentiles(values)
        rows.append([label, f"{p['p50']:.0f} {unit}", f"{p['max']:.0f} {unit}"])
    return rows


async def cpu_per_message(messages: int, browser: bool) -> float:
    extra = "tools: {browser: {enabled: true}}" if browser else ""
    async with running_bot([], extra, keep_events=False) as (_, _app, channel):
        await channel.inject(dm("hello", "warmup", platform=channel.platform))
        await channel.wait_for_replies(1, 30)
        before = cpu_seconds()
        for i in range(messages):
            await channel.inject(dm("hello", f"user{i % 20}", platform=channel.platform))
            await channel.wait_for_replies(2 + i, 30)
        return (cpu_seconds() - before) * 1000 / messages


async def main(runs: int, messages: int) -> None:
    rows = await browser_figures(runs)
    print(f"browser: {runs} runs (p50, max)")
    print(table(["figure", "p50", "max"], rows))
    off = await cpu_per_message(messages, browser=False)
    on = await cpu_per_message(messages, browser=True)
    print(table(["bot CPU per message (fake LLM, no tool call)", "ms"],
                [["browser off", f"{off:.2f}"], ["browser on, unused", f"{on:.2f}"]]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.browser", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.messages))
