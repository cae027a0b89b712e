"""observability: what Prometheus metrics and OpenTelemetry traces cost (``ops``, ``telemetry``)."""

from __future__ import annotations

import asyncio
import random
import socket
import time

import aiohttp

from bench.common import running_stack
from bench.report import Figure, Goal
from bot.agent.events import EventKind, RunEvent
from bot.conversation import Conversation
from bot.llm import ToolCall
from bot.messages import ChatType
from bot.observe import Observed, Signal
from bot.providers.base import Usage
from bot.session_keys import SessionKey
from bot.tracing import Span, SpanKind, TraceRecord
from tests.fakes.otlp_server import FakeCollector

NAME = "observability"
HOW = ("The same DMs, one at a time over 10 chats (quick: 100 messages, else 400, after a warm-up per chat), "
       "to a bot with ops and telemetry off, then ops on, then both on (metrics scraped by nobody, traces "
       "exported to a local OTLP receiver): the bot process's CPU per message (/proc/PID/stat), and how much "
       "more it is with both on. "
       "Then a /metrics scrape of that bot over HTTP (time, bytes), and one of a Metrics fed the runs of 10,000 "
       "sessions (3 platforms, 4 models, 12 tools; generate_latest, median of 20; labels never name a session).")
FIRST_CHAT = 3000
SESSIONS = 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(quick: bool) -> list[Figure]:
    messages, chats = (100, 10) if quick else (400, 10)
    cpu: dict[str, float] = {}
    port = _free_port()
    scrape: tuple[float, int] = (0.0, 0)
    async with running_stack() as stack, FakeCollector() as collector:
        ops = {"enabled": True, "bind": f"127.0.0.1:{port}"}
        for phase, (label, extra) in enumerate((("off", {}), ("metrics", {"ops": ops}),
                                                ("on", {"ops": ops, "telemetry": {"otlp_endpoint": collector.url}}))):
            ids = [FIRST_CHAT + 100 * phase + i for i in range(chats)]  # fresh chats: histories of the same length
            bot = await stack.start_bot(extra=extra)
            await asyncio.gather(*(stack.ask(chat_id, "warm up") for chat_id in ids))
            used = bot.cpu_seconds()
            for i in range(messages):
                await stack.ask(ids[i % chats], f"message {i}")
            cpu[label] = (bot.cpu_seconds() - used) / messages
            if label == "on":
                scrape = await _scrape(f"http://127.0.0.1:{port}/metrics")
        await stack.stop_bot()
    more = (cpu["on"] - cpu["off"]) / cpu["off"] * 100 if cpu["off"] else None
    took, size = _scrape_sessions(SESSIONS)
    return [
        Figure(NAME, f"bot CPU per message, metrics and tracing off ({messages} msgs)", cpu["off"] * 1000, "ms"),
        Figure(NAME, "bot CPU per message, metrics on", cpu["metrics"] * 1000, "ms"),
        Figure(NAME, "bot CPU per message, metrics and tracing on", cpu["on"] * 1000, "ms"),
        Figure(NAME, "CPU added by metrics and tracing", more, "%", Goal("<", 3),
               note=f"{len(collector.spans)} spans received"),
        Figure(NAME, "/metrics scrape of the running bot, over HTTP", scrape[0] * 1000, "ms", Goal("<", 20)),
        Figure(NAME, "/metrics size of the running bot", scrape[1] / 1024, "KiB"),
        Figure(NAME, f"/metrics with {SESSIONS} sessions: generate_latest", took * 1000, "ms", Goal("<", 20)),
        Figure(NAME, f"/metrics with {SESSIONS} sessions: size", size / 1024, "KiB", Goal("<", 256)),
    ]


async def _scrape(url: str) -> tuple[float, int]:
    """The median time of 10 scrapes over HTTP, and the body's size."""
    times, size = [], 0
    async with aiohttp.ClientSession() as http:
        for _ in range(10):
            began = time.perf_counter()
            async with http.get(url) as response:
                body = await response.read()
            times.append(time.perf_counter() - began)
            size = len(body)
    return sorted(times)[len(times) // 2], size


def _scrape_sessions(sessions: int) -> tuple[float, int]:
    """A Metrics fed one run (two model calls, a tool call) and a delivery per session; the median
    time of 20 ``generate_latest`` and the size of the exposition."""
    from prometheus_client import generate_latest

    from bot.ops.metrics import Metrics

    metrics = Metrics(lambda: (sessions // 100, sessions // 50), lambda: {"telegram": True, "slack": True})
    rand = random.Random(7)
    platforms, models = ("telegram", "slack", "discord"), ("gpt-a", "gpt-b", "claude-c", "claude-d")
    tools = tuple(f"tool_{i}" for i in range(12))
    now = time.time()
    for n in range(sessions):
        platform, model, tool = rand.choice(platforms), rand.choice(models), rand.choice(tools)
        key = SessionKey("main", ChatType.DM, f"user{n}", platform)
        conv = Conversation(key, platform, "", f"chat{n}", ChatType.DM)
        run_id = f"run{n}"
        metrics.on_signal(Observed(Signal.MESSAGE_IN, platform))
        metrics.on_event(RunEvent(EventKind.STARTED, run_id, conv))
        metrics.on_event(RunEvent(EventKind.CHUNK, run_id, conv, "hi"))
        metrics.on_event(RunEvent(EventKind.TOOL_RESULT, run_id, conv, tool=ToolCall("c1", tool, "{}"),
                                  is_error=rand.random() < 0.1))
        spans = (Span(SpanKind.LLM, model, now, 800, 1200, 80, 0.002),
                 Span(SpanKind.TOOL, tool, now + 1, 30),
                 Span(SpanKind.LLM, model, now + 1.1, 600, 1400, 120, 0.003))
        trace = TraceRecord(run_id, conv.session_key, "main", now, now + 2, "completed", model, 2600, 200, 0.005,
                            2, spans=spans)
        metrics.on_event(RunEvent(EventKind.COMPLETED, run_id, conv, "answer", usage=Usage(2600, 200), trace=trace))
        metrics.on_signal(Observed(Signal.DELIVERY_OWED, platform, ref=run_id))
        metrics.on_signal(Observed(Signal.DELIVERED, platform, value=0.2, ref=run_id))
    times = []
    for _ in range(20):
        began = time.perf_counter()
        body = generate_latest(metrics.registry)
        times.append(time.perf_counter() - began)
    return sorted(times)[len(times) // 2], len(body)
