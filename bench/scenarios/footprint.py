"""footprint: `chatgate run` with Telegram, Slack and Discord (their fakes): process start to the
first answer, and resident memory idle and after 1,000 sessions."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

from bench.common import BOT_TREE, BotProcess, Stack, running_stack
from bench.discord_stack import FakeDiscordProcess
from bench.report import Figure, Goal
from bench.slack_stack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlackProcess

NAME = "footprint"
HOW = ("`python -m bot run -c CONFIG` with Telegram (long polling), Slack (socket mode) and Discord (gateway) on "
       "their fakes, SQLite, chatgate's modules byte-compiled first (as installed), started 5 times (quick: 3) on "
       "the same database (the first start creates it, and is not counted). Before each start a Telegram DM waits "
       "in the fake; start to first answer = from just before the process is created to the fake Telegram "
       "recording the answer's sendMessage (both time.monotonic()), and the bot's CPU seconds by then; with the "
       "time to Telegram's first getUpdates, Slack's socket and Discord's IDENTIFY. RSS idle: VmRSS 3 s after the "
       "last start's first answer. 1,000 sessions: DMs from 1,000 Telegram chats (quick: 200), 50 at a time, each "
       "answered, then VmRSS (and VmHWM). BENCH_FOOTPRINT=telegram runs Telegram alone.")
FIRST_CHAT = 20000


async def run(quick: bool) -> list[Figure]:
    # chatgate's modules byte-compiled, as an installed package (and the Docker image) has them: with
    # PYTHONDONTWRITEBYTECODE set and none there, every start would compile them from source
    compiled = await asyncio.create_subprocess_exec(sys.executable, "-m", "compileall", "-q", str(BOT_TREE / "bot"),
                                                    str(BOT_TREE / "adapters"), stdout=asyncio.subprocess.DEVNULL)
    await compiled.wait()
    starts, sessions = (3, 200) if quick else (5, 1000)
    alone = os.environ.get("BENCH_FOOTPRINT", "").strip() == "telegram"
    async with running_stack() as stack, AsyncExitStack() as more:
        extra: dict[str, Any] = {}
        slack = discord = None
        if not alone:
            slack = await more.enter_async_context(FakeSlackProcess())
            discord = await more.enter_async_context(FakeDiscordProcess(channels=2))
            info = discord.info
            extra = {"channels": {
                "slack": {"enabled": True, "mode": "socket", "bot_token": BOT_TOKEN, "app_token": APP_TOKEN,
                          "signing_secret": SIGNING_SECRET, "base_url": slack.base_url, "dm_policy": "open",
                          "streaming": "off"},
                "discord": {"enabled": True, "token": info["token"], "api_base": info["api_base"],
                            "gateway_url": info["gateway_url"], "dm_policy": "open", "guilds": [info["guild"]]}}}
        config = stack.config(extra=extra)
        firsts: list[float] = []
        polls: list[float] = []
        others: list[float] = []
        cpus: list[float] = []
        bot: BotProcess | None = None
        for n in range(starts + 1):
            if bot is not None:
                await bot.stop()
            chat = FIRST_CHAT - 1 - n
            before_slack = (await slack.state())["connections_opened"] if slack else 0
            before_discord = (await discord.state())["identifies"] if discord else 0
            polled = len(await stack.tg.calls("getUpdates"))
            await stack.tg.push(stack.tg.dm(chat, f"first {n}"))
            bot = BotProcess(config, stack.tmp / "bot.log")
            await bot.start()
            answer = (await stack.tg.sent_in(chat, 1, timeout=60))[0]
            cpu = bot.cpu_seconds()
            poll = (await stack.tg.calls("getUpdates", polled, wait=5))[0]
            connected = await _connected(slack, before_slack, discord, before_discord)
            if n:  # the first start made the database
                firsts.append(float(answer["time"]) - bot.started_at)
                polls.append(float(poll["time"]) - bot.started_at)
                cpus.append(cpu)
                if connected is not None:
                    others.append(connected - bot.started_at)
        assert bot is not None
        await asyncio.sleep(3)
        idle = bot.rss_mb()
        await _sessions(stack, sessions)
        busy, peak = bot.rss_mb(), bot.peak_rss_mb()
        await bot.stop()
    label = "Telegram" if alone else "Telegram, Slack, Discord"
    figures = [
        Figure(NAME, f"{label}: start to first answer, median ({starts} starts)", statistics.median(firsts), "s",
               Goal("<", 1.0)),
        Figure(NAME, f"{label}: start to first answer, slowest", max(firsts), "s"),
        Figure(NAME, f"{label}: start to Telegram's first getUpdates, median", statistics.median(polls), "s"),
        Figure(NAME, f"{label}: the bot's CPU until its first answer, median", statistics.median(cpus), "s",
               note="user + system, the process alone: what the start costs whatever the load"),
    ]
    if others:
        figures.append(Figure(NAME, f"{label}: start to Slack's socket and Discord's IDENTIFY, median",
                              statistics.median(others), "s"))
    return figures + [
        Figure(NAME, f"{label}: RSS idle after the first answer", idle, "MB", Goal("<", 90)),
        Figure(NAME, f"{label}: RSS after {sessions:,} sessions", busy, "MB"),
        Figure(NAME, f"{label}: peak RSS (VmHWM)", peak, "MB"),
    ]


async def _connected(slack: FakeSlackProcess | None, before_slack: int, discord: FakeDiscordProcess | None,
                     before_discord: int) -> float | None:
    """When the later of Slack's socket and Discord's IDENTIFY came (this process's clock, polled
    every 10 ms: within that of the truth); None without them."""
    if slack is None or discord is None:
        return None
    async with asyncio.timeout(60):
        while True:
            slack_state, discord_state = await slack.state(), await discord.state()
            if slack_state["connections_opened"] > before_slack and discord_state["identifies"] > before_discord:
                return time.monotonic()
            await asyncio.sleep(0.01)


async def _sessions(stack: Stack, count: int) -> None:
    """``count`` DMs from as many new chats, 50 at a time, each answered."""
    for start in range(0, count, 50):
        await asyncio.gather(*(stack.ask(FIRST_CHAT + n, f"hello {n}", timeout=60)
                               for n in range(start, min(count, start + 50))))
