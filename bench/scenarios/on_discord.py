"""discord: the Discord channel end to end, through discord.py and the fake Discord gateway."""

from __future__ import annotations

import asyncio

from bench.common import percentiles
from bench.discord_stack import DiscordStack, discord_stack
from bench.report import Figure, Goal
from tests.fakes.llm_server import Reply

NAME = "discord"
HOW = ("The fake Discord (REST + zlib-stream gateway) in a child process with a guild of 20 text channels; "
       "messages are MESSAGE_CREATE events mentioning the bot. Latency = dispatch on the gateway to the "
       "answer's POST, both timed by the fake: 'one at a time' round-robin over the channels (300, quick: 60), "
       "'20 channels at once' each channel sequential, all concurrent; CPU = the bot process's user+system "
       "time over those messages / their number. /stop: 20 (quick: 5) streaming answers stopped with a "
       "mention '/stop' 100 ms after the first token, timed to the fake LLM seeing the stream closed. "
       "Reconnect: 10 (quick: 3) times the fake drops the gateway socket and at once a message is dispatched; "
       "timed from the drop to its answer (discord.py resumes, the event is replayed).")


async def run(quick: bool) -> list[Figure]:
    channels = 20
    messages = 60 if quick else 300
    stops = 5 if quick else 20
    drops = 3 if quick else 10
    names = [f"c{i}" for i in range(channels)]
    figures: list[Figure] = []
    async with discord_stack(channels) as stack:
        bot = await stack.start_bot()
        await asyncio.gather(*(stack.ask(name, "warm up") for name in names))

        latencies: list[float] = []
        cpu = bot.cpu_seconds()
        for i in range(messages):
            said_at, reply = await stack.ask(names[i % channels], f"alone {i}")
            latencies.append(reply["at"] - said_at)
        figures += _latency("one at a time", latencies, bot.cpu_seconds() - cpu)

        latencies = []

        async def converse(name: str, count: int) -> None:
            for i in range(count):
                said_at, reply = await stack.ask(name, f"together {i}")
                latencies.append(reply["at"] - said_at)

        cpu = bot.cpu_seconds()
        await asyncio.gather(*(converse(name, messages // channels) for name in names))
        figures += _latency("20 channels at once", latencies, bot.cpu_seconds() - cpu)

        figures += await _stops(stack, names, stops)
        figures += await _reconnects(stack, names, drops)
    return figures


def _latency(label: str, latencies: list[float], cpu: float) -> list[Figure]:
    p = percentiles(latencies)
    n = len(latencies)
    return [
        Figure(NAME, f"{label}: gateway event to answer, median ({n} msgs)", p["p50"] * 1000, "ms", Goal("<", 15)),
        Figure(NAME, f"{label}: gateway event to answer, p99", p["p99"] * 1000, "ms", Goal("<", 50)),
        Figure(NAME, f"{label}: bot CPU per message", cpu * 1000 / n, "ms", Goal("<", 3)),
    ]


async def _stops(stack: DiscordStack, names: list[str], stops: int) -> list[Figure]:
    llm, dc = stack.llm, stack.dc
    closed: list[float] = []
    missed = 0
    for n in range(stops):
        name, index = names[n % len(names)], len(llm.reports)
        await llm.script(Reply.text("word " * 500, delay=0.02))
        await dc.say(name, "write a long answer")
        await llm.first_token(index, timeout=10)
        await asyncio.sleep(0.1)
        count = len(dc.by_channel[dc.channel(name)]) + 1
        said_at = await dc.say(name, "/stop")
        gone = await llm.disconnected(index, timeout=5)
        await dc.sent_in(name, count, timeout=10)  # "Stopped."
        if gone is None:
            missed += 1
        else:
            closed.append(gone - said_at)
    p = percentiles(closed) if closed else None
    figures = [
        Figure(NAME, f"/stop to stream closed, p50 ({len(closed)} stops)", p and p["p50"] * 1000, "ms"),
        Figure(NAME, "/stop to stream closed, p99", p and p["p99"] * 1000, "ms", Goal("<", 100)),
    ]
    if missed:
        figures.append(Figure(NAME, "streams not closed within 5 s", missed, goal=Goal("=", 0)))
    return figures


async def _reconnects(stack: DiscordStack, names: list[str], drops: int) -> list[Figure]:
    dc = stack.dc
    took: list[float] = []
    for n in range(drops):
        name = names[n % len(names)]
        count = len(dc.by_channel[dc.channel(name)]) + 1
        dropped_at = await dc.drop()
        await dc.say(name, f"after drop {n}")
        [*_, reply] = await dc.sent_in(name, count, timeout=60)
        took.append(reply["at"] - dropped_at)
        await asyncio.sleep(0.2)
    p = percentiles(took)
    return [
        Figure(NAME, f"dropped gateway to next answer, p50 ({drops} drops)", p["p50"] * 1000, "ms"),
        Figure(NAME, "dropped gateway to next answer, max", p["max"] * 1000, "ms", Goal("<", 5000)),
    ]
