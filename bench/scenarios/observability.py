"""observability: what Prometheus metrics and OpenTelemetry traces cost (``ops``, ``telemetry``)."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
import time

import aiohttp

from bench.common import JSON, running_stack
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
HOW = ("Three bots side by side, each on a fake LLM and a fake Telegram of its own: ops and telemetry off, ops on, "
       "both on (metrics scraped by nobody, traces exported to a local OTLP receiver). The same DMs, one at a time "
       "over 10 chats (quick: 100 messages, else 400, after a warm-up per chat), go to the three in turn (each "
       "first in turn), message by message, so that whatever else loads the machine loads the three alike; each "
       "round (quick: 1, else 3; BENCH_ROUNDS) puts each bot on another stack and fresh chats. Each bot process's "
       "CPU per message (/proc/PID/stat), the median of the rounds, and how much more it is with both on (the "
       "median of each round's own difference). The telemetry and the metrics code alone, in this process: CPU per "
       "run (one model call and its delivery, five streamed chunks) on the event loop and in the exporting thread "
       "(its own CPU clock), against a local OTLP receiver. "
       "Then a /metrics scrape of the bot with both on over HTTP (time, bytes), and one of a Metrics fed the runs of "
       "10,000 sessions (3 platforms, 4 models, 12 tools; generate_latest, median of 20; labels never name a "
       "session).")
FIRST_CHAT = 3000
SESSIONS = 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(quick: bool) -> list[Figure]:
    messages, chats = (100, 10) if quick else (400, 10)
    rounds = int(os.environ.get("BENCH_ROUNDS", "1" if quick else "3"))
    labels = ("off", "metrics", "on")
    cpu: dict[str, list[float]] = {label: [] for label in labels}
    ports = {label: _free_port() for label in labels}
    scrape: tuple[float, int] = (0.0, 0)
    load = [os.getloadavg()[0]]
    async with running_stack() as one, running_stack() as two, running_stack() as three, \
            FakeCollector() as collector:
        stacks = (one, two, three)
        extras: dict[str, JSON] = {
            "off": {}, "metrics": {"ops": {"enabled": True, "bind": f"127.0.0.1:{ports['metrics']}"}},
            "on": {"ops": {"enabled": True, "bind": f"127.0.0.1:{ports['on']}"},
                   "telemetry": {"otlp_endpoint": collector.url}}}
        for n in range(rounds):
            placed = {label: stacks[(i + n) % len(stacks)] for i, label in enumerate(labels)}
            bots = {label: await placed[label].start_bot(extra=extras[label]) for label in labels}
            ids = [FIRST_CHAT + 100 * n + i for i in range(chats)]  # fresh chats: histories alike in every round
            for label in labels:
                await asyncio.gather(*(placed[label].ask(chat_id, "warm up") for chat_id in ids))
            used = {label: bots[label].cpu_seconds() for label in labels}
            for i in range(messages):
                for label in labels[i % 3:] + labels[:i % 3]:  # each first, second and third in turn
                    await placed[label].ask(ids[i % chats], f"message {i}")
            for label in labels:
                cpu[label].append((bots[label].cpu_seconds() - used[label]) / messages)
            if n == 0:
                scrape = await _scrape(f"http://127.0.0.1:{ports['on']}/metrics")
            load.append(os.getloadavg()[0])
            for stack in stacks:  # the next round moves each bot (and its ops port) to another stack
                await stack.stop_bot()
    off, metrics, on = (_median(cpu[label]) for label in ("off", "metrics", "on"))
    paired = [(b - a) / a * 100 for a, b in zip(cpu["off"], cpu["on"], strict=True) if a]
    more = _median(paired) if paired else None
    rounds_note = "; ".join(f"{label}: " + ", ".join(f"{v * 1000:.2f}" for v in cpu[label]) for label in cpu)
    took, size = _scrape_sessions(SESSIONS)
    loop_us, all_us, metrics_us = await _alone(300 if quick else 3000)
    return [
        Figure(NAME, f"bot CPU per message, metrics and tracing off ({messages} msgs, median of {rounds})",
               off * 1000, "ms", note=f"rounds (ms) {rounds_note}"),
        Figure(NAME, "bot CPU per message, metrics on", metrics * 1000, "ms"),
        Figure(NAME, "bot CPU per message, metrics and tracing on", on * 1000, "ms"),
        Figure(NAME, "CPU added by metrics and tracing", more, "%", Goal("<", 3),
               note=f"rounds: {', '.join(f'{p:+.1f}' for p in paired)}; of the medians: "
                    f"{(on - off) / off * 100 if off else 0:+.1f}; {len(collector.spans)} spans received; "
                    f"load average {min(load):.2f}-{max(load):.2f}"),
        Figure(NAME, "telemetry alone: CPU per run on the event loop", loop_us, "µs"),
        Figure(NAME, "telemetry alone: CPU per run in all (the loop and its exporting thread)", all_us, "µs",
               note=f"{all_us / (off * 1e6) * 100:.2f} % of a message with both off" if off else ""),
        Figure(NAME, "metrics alone: CPU per run (its events and signals)", metrics_us, "µs",
               note=f"{metrics_us / (off * 1e6) * 100:.2f} % of a message with both off" if off else ""),
        Figure(NAME, "/metrics scrape of the running bot, over HTTP", scrape[0] * 1000, "ms", Goal("<", 20)),
        Figure(NAME, "/metrics size of the running bot", scrape[1] / 1024, "KiB"),
        Figure(NAME, f"/metrics with {SESSIONS} sessions: generate_latest", took * 1000, "ms", Goal("<", 20)),
        Figure(NAME, f"/metrics with {SESSIONS} sessions: size", size / 1024, "KiB", Goal("<", 256)),
    ]


async def _alone(runs: int) -> tuple[float, float, float]:
    """The telemetry code fed ``runs`` runs (a model call, five chunks, a delivery) against a local
    receiver: µs of CPU per run on the event loop, and in all (the loop and the exporting thread's own
    clock, read once every span came); then the metrics fed the same: µs per run."""
    from bot.ops.metrics import Metrics
    from bot.telemetry.export import RunTraces

    key = SessionKey("main", ChatType.DM, "42", "telegram")
    conv = Conversation(key, "telegram", "", "42", ChatType.DM)
    now = time.time()
    events: list[tuple[RunEvent, ...]] = []
    for n in range(runs):
        run_id = f"run{n}"
        trace = TraceRecord(run_id, conv.session_key, "main", now, now + 0.5, "completed", "fake-model", 1200, 80,
                            0.001, 1, spans=(Span(SpanKind.LLM, "fake-model", now, 400, 1200, 80, 0.001),))
        events.append((RunEvent(EventKind.STARTED, run_id, conv),
                       *(RunEvent(EventKind.DELTA, run_id, conv, "text ") for _ in range(5)),
                       RunEvent(EventKind.COMPLETED, run_id, conv, "answer", usage=Usage(1200, 80), trace=trace)))
    signals = [(Observed(Signal.MESSAGE_IN, "telegram"), Observed(Signal.DELIVERY_OWED, "telegram", ref=f"run{n}"),
                Observed(Signal.DELIVERED, "telegram", value=0.1, ref=f"run{n}")) for n in range(runs)]
    async with FakeCollector() as collector:
        traces = RunTraces(f"{collector.url}/v1/traces", headers={}, service="bench", instance="bench",
                           providers={"fake-model": "openai"})
        shipper = next(t for t in threading.enumerate() if t.name == "chatgate traces")
        assert shipper.ident is not None
        clock = time.pthread_getcpuclockid(shipper.ident)
        thread_began, on_loop = time.clock_gettime(clock), 0.0
        for run, said in zip(events, signals, strict=True):
            began = time.thread_time()
            for event in run:
                traces.on_event(event)
            for observed in said:
                traces.on_signal(observed)
            on_loop += time.thread_time() - began
            await asyncio.sleep(0)  # the receiver answers meanwhile, as the bot's loop would go on
        await collector.wait_for(lambda spans: len(spans) >= 3 * runs, timeout=120)
        in_thread = time.clock_gettime(clock) - thread_began
        await traces.aclose()
    metrics = Metrics()
    began = time.thread_time()
    for run, said in zip(events, signals, strict=True):
        for event in run:
            metrics.on_event(event)
        for observed in said:
            metrics.on_signal(observed)
    metrics_cpu = time.thread_time() - began
    return on_loop / runs * 1e6, (on_loop + in_thread) / runs * 1e6, metrics_cpu / runs * 1e6


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


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
        metrics.on_event(RunEvent(EventKind.DELTA, run_id, conv, "hi"))
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
