"""schedules: 10,000 scheduled jobs: the scheduler's memory, CPU while idle, and 1,000 reminders
due in the same second."""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections import Counter
from pathlib import Path

from bench.common import percentiles, running_stack, settle
from bench.report import Figure, Goal
from bot.conversation import Conversation
from bot.schedules.jobs import JobKind, RuleKind, When
from bot.schedules.service import Creator, Schedules, ScheduleSettings
from bot.schedules.store import StoredSchedules
from bot.store.sqlite import SQLiteStore

NAME = "schedules"
HOW = ("The bot (chatgate run, dm_policy open) starts once with no job (its RSS read after 5 s), is stopped, and "
       "10,000 daily reminders (quick: 2,000), each for its own DM chat and due over the next day but none in "
       "the next hour, are made through the store and the schedule service; the bot starts again: RSS after "
       "5 s (the scheduler holds no job in memory: the difference is the cost of 10,000 jobs), then its CPU "
       "time over 60 s of idling (quick: 10 s), from /proc/PID/stat (Telegram's long poll included). Then it "
       "is stopped, 1,000 reminders (quick: 200) are made due in the same second, 20 s ahead, and it starts "
       "again: due-to-delivered latency per reminder = the fake Telegram's sendMessage time minus the due "
       "instant (one clock); lost = chats without their reminder, doubled = reminders beyond one per chat.")
FIRST_CHAT = 100_000
DUE_CHAT = 500_000
LEAD = 20  # seconds from making the due reminders to their instant (the bot starts meanwhile)
SETTLE = 5.0


async def run(quick: bool) -> list[Figure]:
    jobs = 2_000 if quick else 10_000
    due = 200 if quick else 1_000
    window = 10.0 if quick else 60.0
    async with running_stack() as stack:
        tg = stack.tg
        bot = await stack.start_bot()
        await asyncio.sleep(SETTLE)
        rss_empty = bot.rss_mb()
        await stack.stop_bot()
        made = time.monotonic()
        await _make(stack.db, [(FIRST_CHAT + i, _daily(i, jobs)) for i in range(jobs)])
        making = time.monotonic() - made
        bot = await stack.start_bot()
        await asyncio.sleep(SETTLE)
        rss_full = bot.rss_mb()
        cpu = bot.cpu_seconds()
        await asyncio.sleep(window)
        idle = (bot.cpu_seconds() - cpu) / window
        await stack.stop_bot()

        instant = math.ceil(time.time()) + LEAD
        due_mono = instant - time.time() + time.monotonic()  # the due instant on the fakes' clock
        chats = [DUE_CHAT + i for i in range(due)]
        await _make(stack.db, [(chat, When(RuleKind.AT, "UTC", instant)) for chat in chats])
        await stack.start_bot()
        wanted = set(chats)

        def delivered() -> Counter[int]:
            return Counter(int(r["chat_id"]) for r in tg.sent if int(r["chat_id"]) in wanted)

        await settle(lambda: len(delivered()) == due, lambda: len(tg.sent), quiet=LEAD + 20.0,
                     timeout=LEAD + 60.0, interval=0.1)
        await settle(lambda: False, lambda: len(tg.sent), quiet=2.0, timeout=2.0)  # late duplicates, if any
        counted = delivered()
        first: dict[int, float] = {}
        for record in tg.sent:
            chat = int(record["chat_id"])
            if chat in wanted and chat not in first:
                first[chat] = float(record["time"]) - due_mono
    latencies = list(first.values())
    spread = percentiles(latencies) if latencies else None
    return [
        Figure(NAME, f"RSS with {jobs:,} jobs minus with none", rss_full - rss_empty, "MB"),
        Figure(NAME, f"RSS of the bot with {jobs:,} jobs (VmRSS)", rss_full, "MB"),
        Figure(NAME, f"bot CPU while idle, {jobs:,} jobs, over {window:.0f} s", idle * 100, "%",
               goal=Goal("<", 0.1)),
        Figure(NAME, f"making {jobs:,} jobs (service + store, bot down)", making, "s"),
        Figure(NAME, f"due-to-delivered median, {due:,} due in one second",
               statistics.median(latencies) if latencies else None, "s"),
        Figure(NAME, "due-to-delivered p99", spread["p99"] if spread else None, "s", goal=Goal("<", 2.0)),
        Figure(NAME, "due-to-delivered max", spread["max"] if spread else None, "s"),
        Figure(NAME, f"lost ({due:,} reminders due at once)", due - len(counted), goal=Goal("=", 0)),
        Figure(NAME, "doubled", sum(n - 1 for n in counted.values()), goal=Goal("=", 0)),
    ]


def _daily(i: int, jobs: int) -> When:
    """A daily reminder, due between one hour and a day from now."""
    start = math.ceil(time.time()) + 3600 + (i * (86400 - 7200)) // jobs
    return When(RuleKind.EVERY, "UTC", start, 86400)


async def _make(db: Path, jobs: list[tuple[int, When]]) -> None:
    """Reminders made the way the bot makes them (the service over the store), one per chat."""
    async with SQLiteStore(db) as store:
        schedules = Schedules(StoredSchedules(store), ScheduleSettings(max_per_person=1))
        for chat, when in jobs:
            creator = Creator(Conversation.of_key(f"agent:main:telegram:dm:{chat}"), str(chat), f"User {chat}")
            await schedules.create(creator, JobKind.REMINDER, f"reminder for {chat}", when)
