"""throughput: a burst of messages in many chats, in both queue modes that keep every message."""

from __future__ import annotations

from collections import Counter

from bench.common import Stack, running_stack, settle
from bench.report import Figure, Goal

NAME = "throughput"
HOW = ("200 chats (quick: 50) x 10 DMs pushed in one go (interleaved by chat; getUpdates hands out 100 at a time), "
       "runs.max_concurrent = the number of chats, debounce_ms at its default (500); the bot is restarted per "
       "queue mode. msg/s = messages / (push to the last answer's sendMessage). followup: every message must be "
       "answered once (counted by chat and text from sendMessage); collect: every message must reach the model "
       "once (counted by chat and text from the last user message of each request the fake LLM got).")
TIMEOUT = 120.0  # seconds for the whole burst
QUIET = 10.0  # ... or this long without progress


async def run(quick: bool) -> list[Figure]:
    chats = 50 if quick else 200
    figures: list[Figure] = []
    async with running_stack() as stack:
        for n, mode in enumerate(("followup", "collect")):
            await stack.start_bot(runs={"queue_mode": mode, "max_concurrent": chats})
            figures += await _burst(stack, mode, [10_000 * (n + 1) + i for i in range(chats)], 10)
    return figures


async def _burst(stack: Stack, mode: str, ids: list[int], per_chat: int) -> list[Figure]:
    tg, llm = stack.tg, stack.llm
    expected = {(chat_id, f"c{chat_id} m{i}") for i in range(per_chat) for chat_id in ids}
    sent_before, requests_before = len(tg.sent), len(llm.reports)
    pushed_at = await tg.push(*(tg.dm(chat_id, f"c{chat_id} m{i}") for i in range(per_chat) for chat_id in ids))

    def answered() -> Counter[tuple[int, str]]:
        return Counter((int(r["chat_id"]), r["plain"].removeprefix("echo: ")) for r in tg.sent[sent_before:])

    def modelled() -> Counter[tuple[int, str]]:
        # a chat's DMs come from its own user, whose id is the chat id; texts batched in one run are joined
        return Counter((int(t.split()[0][1:]), t) for r in llm.reports[requests_before:]
                       for t in r["user"].split("\n\n") if t.startswith("c"))

    def done() -> bool:
        if mode == "followup":
            return expected <= answered().keys()
        # collect: every message seen by the model, and every request answered
        return expected <= modelled().keys() and len(tg.sent) - sent_before >= len(llm.reports) - requests_before

    await settle(done, lambda: (len(tg.sent), len(llm.reports)), quiet=QUIET, timeout=TIMEOUT, interval=0.1)
    counted = answered() if mode == "followup" else modelled()
    replies = tg.sent[sent_before:]
    end = max((r["time"] for r in replies), default=pushed_at)
    lost = len(expected - counted.keys())
    duplicated = sum(n - 1 for key, n in counted.items() if key in expected and n > 1)
    where = "answers" if mode == "followup" else "at the model"
    return [
        Figure(NAME, f"{mode}: messages per second, end to end ({len(expected)} msgs)",
               len(expected) / (end - pushed_at) if replies else None, "msg/s", Goal(">=", 300), "8.6 replies/s"),
        Figure(NAME, f"{mode}: lost ({where})", lost, goal=Goal("=", 0), peer="65 of 1,000"),
        Figure(NAME, f"{mode}: duplicated ({where})", duplicated, goal=Goal("=", 0)),
        Figure(NAME, f"{mode}: model requests", len(llm.reports) - requests_before),
        Figure(NAME, f"{mode}: sendMessages", len(replies)),
    ]
