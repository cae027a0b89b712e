"""overhead: what the bot itself adds to a message, with a model that answers at once."""

from __future__ import annotations

import asyncio

from bench.common import Stack, percentiles, running_stack
from bench.report import Figure, Goal

NAME = "overhead"
HOW = ("DMs in 20 chats (quick: 10) after one unmeasured warm-up message per chat, twice: 'one at a time' "
       "sends the messages round-robin over the chats, the next once the previous answer arrived (latency "
       "without load); 'chats at once' lets every chat do that at the same time (each chat sequential, all "
       "chats concurrent). Latency = push to sendMessage, both timed by the fake Telegram; CPU = the bot "
       "process's user+system time (/proc/PID/stat) over the messages / their number.")
FIRST_CHAT = 1000


class _Sample:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.wrong = 0  # replies other than the echo

    async def ask(self, stack: Stack, chat_id: int, text: str) -> None:
        pushed_at, reply = await stack.ask(chat_id, text)
        self.latencies.append(reply["time"] - pushed_at)
        self.wrong += reply["plain"] != f"echo: {text}"


async def run(quick: bool) -> list[Figure]:
    chats, messages = (10, 100) if quick else (20, 500)
    ids = [FIRST_CHAT + i for i in range(chats)]
    per_chat, extra = divmod(messages, chats)
    counts = [per_chat + (i < extra) for i in range(chats)]
    figures: list[Figure] = []
    async with running_stack() as stack:
        bot = await stack.start_bot()
        await asyncio.gather(*(stack.ask(chat_id, "warm up") for chat_id in ids))

        async def converse(sample: _Sample, chat_id: int, count: int) -> None:
            for i in range(count):
                await sample.ask(stack, chat_id, f"at once {i}")

        for label, peer in (("one at a time", True), ("chats at once", False)):
            sample = _Sample()
            cpu = bot.cpu_seconds()
            if label == "one at a time":
                for i in range(messages):
                    await sample.ask(stack, ids[i % chats], f"alone {i}")
            else:
                await asyncio.gather(*(converse(sample, c, n) for c, n in zip(ids, counts)))
            cpu = bot.cpu_seconds() - cpu
            figures += _figures(label, sample, cpu, peer)
    return figures


def _figures(label: str, sample: _Sample, cpu: float, peer: bool) -> list[Figure]:
    p = percentiles(sample.latencies)
    n = len(sample.latencies)
    figures = [
        Figure(NAME, f"{label}: push to sendMessage, median ({n} msgs)", p["p50"] * 1000, "ms", Goal("<", 15),
               "2.4 s" if peer else ""),
        Figure(NAME, f"{label}: push to sendMessage, p99", p["p99"] * 1000, "ms", Goal("<", 50)),
        Figure(NAME, f"{label}: bot CPU per message", cpu * 1000 / n, "ms", Goal("<", 3), "~120 ms" if peer else ""),
    ]
    if sample.wrong:
        figures.append(Figure(NAME, f"{label}: replies that were not the echo", sample.wrong, goal=Goal("=", 0)))
    return figures
