"""startup: how long `chatgate run` takes until it listens for messages."""

from __future__ import annotations

import statistics

from bench.common import running_stack
from bench.report import Figure, Goal

NAME = "startup"
HOW = ("`python -m bot run -c CONFIG` started 5 times (quick: 3) against the same database (the first start "
       "creates it); from just before the process is created (the benchmark's clock) to its first getUpdates "
       "reaching the fake Telegram (the fake's clock; both time.monotonic()).")


async def run(quick: bool) -> list[Figure]:
    starts = 3 if quick else 5
    times: list[float] = []
    async with running_stack() as stack:
        for _ in range(starts):
            bot = await stack.start_bot()
            times.append(stack.ready_at - bot.started_at)
            await stack.stop_bot()
    return [
        Figure(NAME, f"process start to first getUpdates, median ({starts} starts)", statistics.median(times), "s",
               Goal("<", 1.0), "1.9 s"),
        Figure(NAME, "process start to first getUpdates, slowest", max(times), "s"),
    ]
