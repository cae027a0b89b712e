"""slack: the Slack channel end to end, in Socket Mode and over HTTP events."""

from __future__ import annotations

import asyncio

from bench.common import percentiles
from bench.report import Figure, Goal
from bench.slack_stack import SlackStack, running_slack_stack
from tests.fakes.llm_server import Reply

NAME = "slack"
HOW = ("For each of Socket Mode and HTTP events: DMs in 20 channels (quick: 10) after one warm-up message each, "
       "'one at a time' round-robin (the next once the previous answer arrived) and 'channels at once' (each "
       "channel sequential, all concurrent); latency = the fake Slack sending the event (envelope, or signed "
       "POST) to its chat.postMessage; CPU = the bot process's user+system time / messages. Then 20 stops "
       "(quick: 5): an answer streaming 500 words, /stop as a slash command 100 ms after its first chunk, "
       "timed to the fake LLM seeing the stream closed.")
FIRST = 1000


class _Sample:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.wrong = 0  # replies other than the echo

    async def ask(self, stack: SlackStack, chat: str, text: str) -> None:
        at, post = await stack.ask(chat, text)
        self.latencies.append(post["at"] - at)
        self.wrong += post["text"] != f"echo: {text}"


async def run(quick: bool) -> list[Figure]:
    figures: list[Figure] = []
    for mode in ("socket", "http"):
        async with running_slack_stack(mode) as stack:
            figures += await _latency(stack, quick)
            figures += await _stop(stack, quick)
    return figures


async def _latency(stack: SlackStack, quick: bool) -> list[Figure]:
    chats, messages = (10, 100) if quick else (20, 400)
    ids = [f"D{FIRST + i}" for i in range(chats)]
    bot = await stack.start_bot()
    await asyncio.gather(*(stack.ask(c, "warm up") for c in ids))
    figures: list[Figure] = []
    for label in ("one at a time", f"{chats} channels at once"):
        sample = _Sample()

        async def converse(sample: _Sample, chat: str, count: int) -> None:
            for i in range(count):
                await sample.ask(stack, chat, f"at once {i}")

        cpu = bot.cpu_seconds()
        if label == "one at a time":
            for i in range(messages):
                await sample.ask(stack, ids[i % chats], f"alone {i}")
        else:
            await asyncio.gather(*(converse(sample, c, messages // chats) for c in ids))
        cpu = bot.cpu_seconds() - cpu
        p, n = percentiles(sample.latencies), len(sample.latencies)
        prefix = f"{stack.mode}, {label}"
        figures += [
            Figure(NAME, f"{prefix}: event to chat.postMessage, median ({n} msgs)", p["p50"] * 1000, "ms",
                   Goal("<", 15)),
            Figure(NAME, f"{prefix}: event to chat.postMessage, p99", p["p99"] * 1000, "ms", Goal("<", 50)),
            Figure(NAME, f"{prefix}: bot CPU per message", cpu * 1000 / n, "ms", Goal("<", 3)),
        ]
        if sample.wrong:
            figures.append(Figure(NAME, f"{prefix}: replies that were not the echo", sample.wrong,
                                  goal=Goal("=", 0)))
    return figures


async def _stop(stack: SlackStack, quick: bool) -> list[Figure]:
    stops = 5 if quick else 20
    llm, closed, missed = stack.llm, [], 0
    for n in range(stops):
        chat, index = f"D{FIRST + 500 + n}", len(llm.reports)
        await llm.script(Reply.text("word " * 500, delay=0.02))
        await stack.slack.send(stack.slack.dm(chat, "write a long answer"), stack.bot_url)
        await llm.first_token(index, timeout=10)
        await asyncio.sleep(0.1)
        at, _ = await stack.command(chat, "/stop")
        gone = await llm.disconnected(index, timeout=5)
        if gone is None:
            missed += 1
        else:
            closed.append(gone - at)
    figures = []
    if closed:
        p = percentiles(closed)
        figures += [Figure(NAME, f"{stack.mode}: /stop to stream closed, p50 ({len(closed)} stops)", p["p50"] * 1000,
                           "ms"),
                    Figure(NAME, f"{stack.mode}: /stop to stream closed, p99", p["p99"] * 1000, "ms", Goal("<", 100))]
    if missed:
        figures.append(Figure(NAME, f"{stack.mode}: streams not closed within 5 s", missed, goal=Goal("=", 0)))
    return figures
