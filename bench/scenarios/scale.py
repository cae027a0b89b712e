"""scale: a thousand chats asking at once, each answer streamed over 2 s."""

from __future__ import annotations

from bench.common import cpu_seconds, running_stack
from bench.report import Figure, Goal

NAME = "scale"
HOW = ("1,000 new DM chats (quick: 200) push one message each in one go; runs.max_concurrent = the number of "
       "chats; the fake LLM streams every answer as 100 tokens over 2 s; streaming: off. Wall time = push to the "
       "last answer's sendMessage. Memory from /proc/PID/status of the bot: VmRSS after one warm-up answer, "
       "VmHWM (peak) after the burst.")
TOKENS, SECONDS = 100, 2.0
FIRST_CHAT = 6000
TIMEOUT = 120.0


async def run(quick: bool) -> list[Figure]:
    chats = 200 if quick else 1000
    async with running_stack("--tokens", str(TOKENS), "--stream-seconds", str(SECONDS)) as stack:
        tg = stack.tg
        bot = await stack.start_bot(runs={"max_concurrent": chats})
        await stack.ask(FIRST_CHAT - 1, "warm up", timeout=30)
        rss_warm, cpu, fakes = bot.rss_mb(), bot.cpu_seconds(), cpu_seconds(stack.llm.pid) + cpu_seconds(tg.pid)
        before = len(tg.sent)
        pushed_at = await tg.push(*(tg.dm(FIRST_CHAT + i, "hello") for i in range(chats)))
        await tg.wait_sent(before + chats, TIMEOUT)
        cpu = bot.cpu_seconds() - cpu
        fakes = cpu_seconds(stack.llm.pid) + cpu_seconds(tg.pid) - fakes
        peak, rss_after = bot.peak_rss_mb(), bot.rss_mb()
        replies = tg.sent[before:]
    complete = sum(r["plain"].count("tok") == TOKENS for r in replies)
    wall = max(r["time"] for r in replies) - pushed_at if replies else None
    return [
        Figure(NAME, f"wall time, {chats} chats", wall, "s", Goal("<", 3)),
        Figure(NAME, "complete answers", complete, goal=Goal("=", chats)),
        Figure(NAME, "peak RSS of the bot (VmHWM)", peak, "MB", Goal("<", 300), "146 MB"),
        Figure(NAME, "RSS after warm-up (VmRSS)", rss_warm, "MB", Goal("<", 100)),
        Figure(NAME, "RSS after the burst (VmRSS)", rss_after, "MB"),
        Figure(NAME, "bot CPU per message", cpu * 1000 / chats, "ms"),
        Figure(NAME, "bot CPU, whole burst", cpu, "s"),
        Figure(NAME, "both fakes' CPU, whole burst (same cores)", fakes, "s"),
    ]
