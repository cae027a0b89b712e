"""mcp: what an MCP tool call costs over a built-in one, start-up with servers, /stop to the server."""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

from bench.common import JSON, Stack, percentiles, running_stack
from bench.report import Figure, Goal
from bot.conversation import Conversation
from bot.llm import ToolCall
from bot.mcp.config import McpConfig
from bot.mcp.hub import McpHub
from bot.tools import ToolCategory, ToolContext, tool
from bot.tools.registry import ToolRegistry
from tests.fakes.llm_server import Call, Reply
from tests.mcp_servers.harness import DEMO, free_port, http_server

NAME = "mcp"
HOW = ("Latency: in one process, the tool registry the agent loop uses runs one call at a time, 300 times "
       "(quick: 100) after 20 unmeasured, the kinds interleaved in a random order: a built-in tool that returns at once, the demo "
       "server's `noop` (the SDK's own MCPServer; it returns at once) through the hub over stdio and over streamable "
       "HTTP on 127.0.0.1, and the same `noop` on the same connection through the SDK's ClientSession alone. Added "
       "latency = the MCP call minus the built-in; chatgate's own share = the MCP call minus the bare SDK call (the "
       "rest is the SDK, the pipe or HTTP and the server). Start-up: `chatgate run` started 5 times (quick: 3) with "
       "no MCP server and with 5 (4 demo servers over stdio, 1 HTTP server nobody listens on), process start to "
       "first getUpdates. /stop: the bot serving Telegram DMs calls the demo server's `slow` over stdio and HTTP, 30 "
       "times each (quick: 10); /stop is pushed once the server wrote that the call started; timed from the push "
       "(fake Telegram's clock) to the server writing that it saw the cancellation (its clock; both "
       "time.monotonic()).")
FIRST_CHAT = 9000


async def run(quick: bool) -> list[Figure]:
    figures = await _latency(100 if quick else 300)
    async with running_stack() as stack:
        figures += await _startup(stack, 3 if quick else 5)
        figures += await _stops(stack, 10 if quick else 30)
    return figures


# -- added latency ----------------------------------------------------------------------------


@tool(category=ToolCategory.OTHER, name="builtin_noop")
async def builtin_noop(ctx: ToolContext) -> str:
    """Return at once."""
    return "ok"


async def _timed(calls: dict[str, Callable[[], Awaitable[object]]], count: int) -> dict[str, list[float]]:
    """Each call ``count`` times, interleaved (one of each per round, in a random order: no call
    always follows the same one), after 20 unmeasured rounds."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    for round_ in range(20 + count):
        random.shuffle(order)
        for name in order:
            call = calls[name]
            started = time.perf_counter()
            await call()
            if round_ >= 20:
                times[name].append(time.perf_counter() - started)
    return times


async def _latency(count: int) -> list[Figure]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-mcp-") as tmp, http_server(port):
        mcp = McpConfig.model_validate({"servers": {
            "stdio": {"command": sys.executable, "args": [DEMO], "grant": "everyone"},
            "http": {"url": f"http://127.0.0.1:{port}/mcp", "allow_private": True, "grant": "everyone"}}})
        async with McpHub(mcp) as hub:
            await hub.settled(30)
            ctx = ToolContext(Path(tmp), Conversation.of_key("agent:main:bench:dm:u1"), "r1", "main", "u1")
            registry = ToolRegistry([builtin_noop]).joined(hub.offer(ctx).tools)

            def through_registry(name: str) -> Callable[[], Awaitable[object]]:
                call = [ToolCall("c1", name, "{}")]
                return lambda: registry.execute(call, ctx)

            # the same noop on the same connection, straight through the SDK: no registry, hub or result handling
            sessions = {name: session for name in ("stdio", "http") if (session := hub.session(name)) is not None}
            times = await _timed({
                "builtin": through_registry("builtin_noop"),
                "stdio": through_registry("mcp__stdio__noop"),
                "stdio sdk": lambda: sessions["stdio"].call_tool("noop", {}),
                "HTTP": through_registry("mcp__http__noop"),
                "HTTP sdk": lambda: sessions["http"].call_tool("noop", {}),
            }, count)
    base = percentiles(times["builtin"])
    figures = [Figure(NAME, f"built-in tool call, median ({count} calls)", base["p50"] * 1000, "ms"),
               Figure(NAME, "built-in tool call, p99", base["p99"] * 1000, "ms")]
    for transport in ("stdio", "HTTP"):
        p, sdk = percentiles(times[transport]), percentiles(times[f"{transport} sdk"])
        figures += [
            Figure(NAME, f"{transport}: MCP call (noop), median", p["p50"] * 1000, "ms"),
            Figure(NAME, f"{transport}: MCP call (noop), p99", p["p99"] * 1000, "ms"),
            Figure(NAME, f"{transport}: added over a built-in, median", (p["p50"] - base["p50"]) * 1000, "ms",
                   Goal("<", 5)),
            Figure(NAME, f"{transport}: added over a built-in, p99", (p["p99"] - base["p99"]) * 1000, "ms"),
            Figure(NAME, f"{transport}: the SDK's own call_tool, median", sdk["p50"] * 1000, "ms"),
            Figure(NAME, f"{transport}: chatgate's share (MCP call - SDK call), median",
                   (p["p50"] - sdk["p50"]) * 1000, "ms", Goal("<", 1)),
        ]
    return figures


# -- start-up ---------------------------------------------------------------------------------


def _servers(down_port: int) -> JSON:
    demo = {"command": sys.executable, "args": [DEMO], "grant": "everyone"}
    servers: JSON = {f"demo{i}": demo for i in range(4)}
    servers["down"] = {"url": f"http://127.0.0.1:{down_port}/mcp", "allow_private": True}
    return {"mcp": {"servers": servers}}


async def _startup(stack: Stack, starts: int) -> list[Figure]:
    times: dict[str, list[float]] = {"none": [], "five": []}
    extra = _servers(free_port())
    for _ in range(starts):
        for label, config in (("none", None), ("five", extra)):
            bot = await stack.start_bot(extra=config)
            times[label].append(stack.ready_at - bot.started_at)
            await stack.stop_bot()
    none, five = statistics.median(times["none"]), statistics.median(times["five"])
    return [
        Figure(NAME, f"start-up, no MCP server, median ({starts} starts)", none, "s"),
        Figure(NAME, "start-up, 5 MCP servers (1 down), median", five, "s", Goal("<", none * 1.1 + 0.05)),
    ]


# -- /stop to the server's cancellation ---------------------------------------------------------


async def _stops(stack: Stack, count: int) -> list[Figure]:
    figures: list[Figure] = []
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-marks-") as tmp:
        marks = {"stdio": Path(tmp) / "stdio", "HTTP": Path(tmp) / "http"}
        async with AsyncExitStack() as servers:
            servers.enter_context(http_server(port, marks["HTTP"]))
            config = {"mcp": {"servers": {
                "stdio": {"command": sys.executable, "args": [DEMO], "grant": "everyone", "approval": "never",
                          "env": {"MARKS": str(marks["stdio"])}},
                "http": {"url": f"http://127.0.0.1:{port}/mcp", "allow_private": True, "grant": "everyone",
                         "approval": "never"}}}}  # the bench times /stop, not a person's Allow
            await stack.start_bot(extra=config)
            for n, (transport, name) in enumerate((("stdio", "mcp__stdio__slow"), ("HTTP", "mcp__http__slow"))):
                chats = FIRST_CHAT + n * 1000
                await _warm(stack, name, marks[transport], chats - 100)
                delays, missed = await _stop_each(stack, name, marks[transport], chats, count)
                p = percentiles(delays) if delays else None
                figures += [
                    Figure(NAME, f"{transport}: /stop to the server's cancellation, median ({len(delays)} stops)",
                           p and p["p50"] * 1000, "ms"),
                    Figure(NAME, f"{transport}: /stop to the server's cancellation, p99", p and p["p99"] * 1000,
                           "ms", Goal("<", 100)),
                ]
                if missed:
                    figures.append(Figure(NAME, f"{transport}: cancellations the server never saw", missed,
                                          goal=Goal("=", 0)))
            await stack.stop_bot()
    return figures


async def _warm(stack: Stack, name: str, marks: Path, chat_id: int) -> None:
    """Until a call of ``name`` reaches its server (the servers connect in the background), then stopped."""
    for attempt in range(20):
        started = _lines(marks, "started")
        await stack.llm.script(Reply.tool_calls([Call(name, {"seconds": 60}, id=f"w{attempt}")]))
        await stack.tg.push(stack.tg.dm(chat_id + attempt, "warm up"))
        if await _until(lambda: _lines(marks, "started") > started, 3):
            await stack.ask(chat_id + attempt, "/stop")
            return
        await stack.tg.sent_in(chat_id + attempt, 1, 10)  # the model was told the tool is unknown: answered
    raise RuntimeError(f"{name} never started; the bot's log:\n{stack.bot.log_tail() if stack.bot else ''}")


async def _stop_each(stack: Stack, name: str, marks: Path, first_chat: int, count: int) -> tuple[list[float], int]:
    delays: list[float] = []
    missed = 0
    for n in range(count):
        chat_id = first_chat + n
        seen = _lines(marks, "cancelled")
        started = _lines(marks, "started")
        await stack.llm.script(Reply.tool_calls([Call(name, {"seconds": 60}, id=f"s{n}")]))
        await stack.tg.push(stack.tg.dm(chat_id, "take your time"))
        if not await _until(lambda: _lines(marks, "started") > started, 15):
            raise RuntimeError(f"{name} never started; the bot's log:\n{stack.bot.log_tail() if stack.bot else ''}")
        pushed_at, _ = await stack.ask(chat_id, "/stop")
        if await _until(lambda: _lines(marks, "cancelled") > seen, 5):
            delays.append(_last(marks, "cancelled") - pushed_at)
        else:
            missed += 1
    return delays, missed


def _lines(path: Path, word: str) -> int:
    return sum(line.startswith(word) for line in path.read_text().splitlines()) if path.exists() else 0


def _last(path: Path, word: str) -> float:
    return float([line for line in path.read_text().splitlines() if line.startswith(word)][-1].split()[1])


async def _until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True

