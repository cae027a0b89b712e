"""Approvals on the wire: press -> the tool starts, and /stop with a card waiting -> the run's end.

The whole App runs in this process with one real channel (python-telegram-bot, slack-bolt in
Socket Mode, discord.py) against its fake server on loopback, and the fake LLM. Each round:
a group member asks, the model calls ``write_file`` (``tools.approval: {write_file: ask}``),
the card appears, then

- press: the member presses Allow once; timed from the press leaving the fake platform to
  the file appearing in the workspace (the tool ran);
- stop: the member sends /stop instead; timed from the command leaving the fake platform to
  the run's ``run.cancelled`` event.

    python -m bench.approvals [--rounds 30] [--only telegram,slack,discord]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from bot.agent.events import EventKind, RunEvent
from bot.channels import Choice
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.test_channel_contract import DiscordHarness, Harness, SlackHarness, TelegramHarness

PLATFORMS = ("telegram", "slack", "discord")


async def _card(h: Harness, seen: int) -> tuple[str, str]:
    async with asyncio.timeout(10):
        while True:
            with sqlite3.connect(f"file:{h.tmp / 'chatgate.db'}?mode=ro", uri=True) as db:
                rows = list(db.execute("SELECT id, question_id FROM approvals WHERE question_id IS NOT NULL "
                                       "ORDER BY asked_at"))
            if len(rows) > seen:
                return rows[-1]
            await asyncio.sleep(0.002)


async def _stop(h: Harness) -> None:
    if isinstance(h, SlackHarness):
        await h._push(h.slack.command("/stop", h.group, user=h.presser))
    else:
        await h.say_in_group("/stop", mention=True)


async def _rounds(h: Harness, llm: FakeLLM, rounds: int) -> tuple[list[float], list[float]]:
    h.extra_yaml = "tools: {approval: {write_file: ask}}\nruns: {debounce_ms: 0}\nlimits: {messages_per_minute: null}"
    await h.start()
    assert h.app is not None
    cancelled: list[float] = []
    h.app.events.subscribe(lambda e: cancelled.append(time.perf_counter())
                           if isinstance(e, RunEvent) and e.kind is EventKind.CANCELLED else None)
    press, stop, cards = [], [], 0
    try:
        for n in range(rounds):
            path = f"note{n}.txt"
            llm.script(Reply.tool_calls([Call("write_file", {"path": path, "content": "x"}, id=f"w{n}")]),
                       Reply.text("Saved."))
            await h.say_in_group(f"save {n}", mention=True)
            approval, question = await _card(h, cards)
            cards += 1
            started = time.perf_counter()
            await h.press(question, Choice(f"ap:{approval}:o", "Allow once"))
            async with asyncio.timeout(10):
                while not list((h.tmp / "workspaces").glob(f"*/{path}")):
                    await asyncio.sleep(0.0005)
            press.append(time.perf_counter() - started)
            await asyncio.sleep(0.2)  # the answer goes out
            llm.script(Reply.tool_calls([Call("write_file", {"path": "never.txt", "content": "x"}, id=f"s{n}")]))
            await h.say_in_group(f"save never {n}", mention=True)
            await _card(h, cards)
            cards += 1
            before = len(cancelled)
            started = time.perf_counter()
            await _stop(h)
            async with asyncio.timeout(10):
                while len(cancelled) == before:
                    await asyncio.sleep(0.0005)
            stop.append(cancelled[-1] - started)
            await asyncio.sleep(0.2)
    finally:
        await h.stop()
    return press, stop


async def _platform(name: str, rounds: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM() as llm:
            if name == "telegram":
                async with FakeTelegram() as tg:
                    return await _rounds(TelegramHarness(Path(tmp), llm, tg), llm, rounds)
            if name == "slack":
                async with FakeSlack() as slack:
                    return await _rounds(SlackHarness(Path(tmp), llm, slack), llm, rounds)
            async with FakeDiscord() as dc:
                return await _rounds(DiscordHarness(Path(tmp), llm, dc), llm, rounds)


def _figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms  (n={len(ordered)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--only", default=",".join(PLATFORMS))
    args = parser.parse_args(argv)
    for name in args.only.split(","):
        press, stop = asyncio.run(_platform(name, args.rounds))
        print(f"{name:<9} press -> tool started      {_figures(press)}")
        print(f"{name:<9} /stop (card waiting) -> run ended  {_figures(stop)}   goal p99 < 100 ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
