"""How fast /stop ends a run, in every phase a run can be in, through the real stack.

The whole bot (App, gateway, dispatcher, agent, the real OpenAI SDK provider, SQLite)
runs here with a recording channel on a platform with ``dm_policy: open``; the fake LLM
runs in a child process (``tests.fakes.llm_server --control``). Each trial is a fresh DM
session: a message, then, once the run is in the phase, ``/stop``. Timed from injecting
``/stop`` to (a) the fake seeing the client go away, for phases with an open model
stream, and (b) "Stopped." being handed to the channel.

    python -m bench.stop_latency [--stops 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass

from bench.common import FakeLLMProcess, percentiles, table, verdict
from bench.inprocess import Seen, TimingChannel, running_bot
from tests.fakes.channel import dm
from tests.fakes.llm_server import Call, Reply

GOAL_DISCONNECT_MS = 100.0
GOAL_STOPPED_MS = 300.0
TIMEOUT = 10.0
# max_concurrent 1 lets the queued phase hold the one slot; the other phases run one at a time anyway.
CONFIG = "tools: {exec: {enabled: true, owners_only: false}}\nruns: {max_concurrent: 1}"


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    replies: tuple[Reply, ...]  # the fake's answers to the trial's model call; () when it never calls the model
    ready: str  # /stop once this is seen: "request" (the fake has the call) or an event kind in the chat
    ready_text: str | None = None
    stream_open: bool = False  # the model's HTTP stream is open when /stop comes: time its disconnect
    settle: float = 0.0  # seconds to wait after ``ready`` (the tool's process to be running)
    hog: bool = False  # another session holds the only run slot meanwhile


PHASES = (
    Phase("first token", (Reply.hang(),), "request", stream_open=True),
    Phase("mid-stream", (Reply.text("word " * 500, delay=0.02),), "chunk", stream_open=True),
    Phase("tool: sleep 30", (Reply.tool_calls([Call("exec", {"command": "sleep 30"})]),), "tool.call", settle=0.1),
    Phase("retry back-off", (Reply.error(429, retry_after=30),), "run.retrying"),
    Phase("queued", (), "activity", "queued", hog=True),
)


@dataclass(frozen=True, slots=True)
class Sample:
    stopped: float  # seconds from /stop to "Stopped." being sent
    disconnect: float | None  # seconds from /stop to the fake seeing the disconnect
    reply: str


class Bench:
    def __init__(self, llm: FakeLLMProcess, channel: TimingChannel) -> None:
        self.llm, self.channel = llm, channel
        self.requests = 0  # model calls made so far: the index of the next one
        self.users = 0

    async def message(self, replies: tuple[Reply, ...], user: str, text: str = "hello") -> int | None:
        """Script the model's answers and send a message; the index of the model call it makes."""
        index = None
        if replies:
            await self.llm.script(*replies)
            index, self.requests = self.requests, self.requests + 1
        await self.channel.inject(dm(text, user, platform=self.channel.platform))
        return index

    async def stop(self, user: str) -> tuple[float, Seen]:
        answered = self.channel.expect(user, "send")
        started = time.monotonic()
        await self.channel.inject(dm("/stop", user, platform=self.channel.platform))
        return started, await asyncio.wait_for(answered, TIMEOUT)

    async def trial(self, phase: Phase) -> Sample:
        self.users += 1
        user = f"user{self.users}"
        ready = None if phase.ready == "request" else self.channel.expect(user, phase.ready, phase.ready_text)
        index = await self.message(phase.replies, user)
        try:
            if ready is None:
                assert index is not None
                await self.llm.request(index, TIMEOUT)
            else:
                await asyncio.wait_for(ready, TIMEOUT)
        except TimeoutError:
            raise SystemExit(f"{phase.name}: the run never reached {phase.ready!r} within {TIMEOUT:.0f} s") from None
        if phase.settle:
            await asyncio.sleep(phase.settle)
        started, seen = await self.stop(user)
        gone = await self.llm.disconnected(index) if phase.stream_open and index is not None else None
        return Sample(seen.at - started, None if gone is None else gone - started, seen.text)

    async def phase(self, phase: Phase, count: int, warmup: int) -> list[Sample]:
        if phase.hog:
            index = await self.message((Reply.hang(),), "hog")
            assert index is not None
            await self.llm.request(index, TIMEOUT)
        samples = [await self.trial(phase) for _ in range(warmup + count)][warmup:]
        if phase.hog:
            await self.stop("hog")
        return samples


async def bench(stops: int, warmup: int) -> list[tuple[Phase, list[Sample]]]:
    async with running_bot(["--control"], CONFIG) as (llm, _, channel):
        b = Bench(llm, channel)
        await b.message((Reply.text("warm"),), "warmup")  # connections, imports, the first workspace
        await channel.wait_for_replies(1, TIMEOUT)
        per_phase, extra = divmod(stops, len(PHASES))
        return [(p, await b.phase(p, per_phase + (i < extra), warmup)) for i, p in enumerate(PHASES)]


def _ms(values: list[float]) -> dict[str, float] | None:
    return {k: round(v * 1000, 1) for k, v in percentiles(values).items()} if values else None


def _cells(stats: dict[str, float] | None) -> list[object]:
    return list(stats.values()) if stats else ["-"] * 4


def report(results: list[tuple[Phase, list[Sample]]], warmup: int) -> None:
    everything = [s for _, samples in results for s in samples]
    rows, summary = [], {}
    for name, samples in [*((p.name, samples) for p, samples in results), ("all", everything)]:
        disconnect = _ms([s.disconnect for s in samples if s.disconnect is not None])
        stopped = _ms([s.stopped for s in samples])
        summary[name] = {"n": len(samples), "disconnect_ms": disconnect, "stopped_ms": stopped}
        rows.append([name, len(samples), *_cells(disconnect), *_cells(stopped)])
    print(f"/stop latency: {len(everything)} stops ({warmup} warm-up per phase not counted); the bot in this "
          f"process, the fake LLM in a child process; real OpenAI SDK; {os.cpu_count()} CPUs")
    print(table(["phase", "n", "disc p50", "p90", "p99", "max", "Stopped. p50", "p90", "p99", "max"], rows))
    print("milliseconds from injecting /stop until: disc = the fake LLM sees the client go away (phases with an "
          "open model stream), Stopped. = the reply is handed to the channel")
    overall = summary["all"]
    disconnect_p99 = overall["disconnect_ms"]["p99"] if overall["disconnect_ms"] else None
    print(f"goal: p99 < {GOAL_DISCONNECT_MS:.0f} ms to disconnect: {verdict(disconnect_p99, GOAL_DISCONNECT_MS)}; "
          f"p99 < {GOAL_STOPPED_MS:.0f} ms to \"Stopped.\": {verdict(overall['stopped_ms']['p99'], GOAL_STOPPED_MS)}")
    for phase, samples in results:
        if phase.stream_open and (missing := sum(s.disconnect is None for s in samples)):
            print(f"warning: {phase.name}: the fake saw no disconnect within 2 s after {missing} stops")
    wrong = [s.reply for s in everything if not s.reply.startswith("Stopped.")]
    if wrong:
        print(f"warning: {len(wrong)} replies to /stop were not \"Stopped.\", e.g. {wrong[0]!r}")
    print(json.dumps({"bench": "stop_latency", "stops": len(everything), "llm": "subprocess", "cpus": os.cpu_count(),
                      "not_stopped": len(wrong), "phases": summary}, separators=(",", ":")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stop_latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stops", type=int, default=200, help="measured stops, spread evenly over the phases")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured stops first in each phase")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("bot.providers.retry").setLevel(logging.ERROR)  # the back-off phase is rate limited on purpose
    report(asyncio.run(bench(args.stops, args.warmup)), args.warmup)


if __name__ == "__main__":
    main()
