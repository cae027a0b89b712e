"""The per-person limits' cost per message: ``PersonLimits.check`` with the rate bucket and a
daily budget on, for many people, against a store that answers at once.

    python -m bench.limits [--messages 200000] [--people 1000]

Prints the CPU time per check (microseconds), to set beside the bot's CPU per message in
``python -m bench`` (milliseconds): the limiter's share of the hot path.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bot.limits import LimitSettings, PersonLimits


class _Usage:
    async def usage_since(self, person: str, since: float) -> tuple[int, float]:
        return 0, 0.0

    async def bot_usage_since(self, since: float) -> tuple[int, float]:
        return 0, 0.0


async def _run(messages: int, people: int, settings: LimitSettings) -> float:
    now = [1_700_000_000.0]
    limits = PersonLimits(settings, _Usage(), clock=lambda: now[0])
    names = [f"telegram:{i}" for i in range(people)]
    for name in names:  # the first check of a person reads the day once: not the steady state
        await limits.check(name)
    started = time.process_time()
    for i in range(messages):
        now[0] += 0.01  # 100 messages a second across everyone: buckets refill, nobody is refused
        await limits.check(names[i % people])
    return (time.process_time() - started) / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.limits")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--people", type=int, default=1_000)
    args = parser.parse_args()
    for label, settings in (
        ("rate only (the default: 20 a minute)", LimitSettings()),
        ("rate + daily tokens + daily cost", LimitSettings(20, 1_000_000, 5.0)),
    ):
        micros = asyncio.run(_run(args.messages, args.people, settings))
        print(f"limits {label}: {micros:.2f} µs CPU per message ({args.messages:,} checks, {args.people:,} people)")


if __name__ == "__main__":
    main()
