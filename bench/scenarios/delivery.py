"""delivery: answers owed while the Bot API refuses every sendMessage, then recovers."""

from __future__ import annotations

from collections import Counter

from bench.common import running_stack, settle
from bench.report import Figure, Goal

NAME = "delivery"
HOW = ("The fake Telegram answers every sendMessage with HTTP 502 for 10 s (quick: 5 s); at the start of the outage "
       "200 DMs (quick: 50) are pushed, one per chat, so every answer is stored and fails. Counted from the fake's "
       "sendMessage records by chat once every chat has its answer (or nothing moved for 40 s): lost = chats "
       "without their answer, duplicated = answers beyond one per chat. Recovery to last delivery = from the "
       "end of the outage to the last answer's sendMessage (both the fake's clock). delivery.retry_for is its "
       "default (600 s).")
FIRST_CHAT = 20_000
QUIET = 40.0  # seconds without a new answer before giving up (the outage itself is silent)
TIMEOUT = 180.0


async def run(quick: bool) -> list[Figure]:
    chats = 50 if quick else 200
    outage = 5.0 if quick else 10.0
    ids = [FIRST_CHAT + i for i in range(chats)]
    async with running_stack() as stack:
        tg, llm = stack.tg, stack.llm
        await stack.start_bot(runs={"max_concurrent": chats})
        until = await tg.fail_for("sendMessage", outage, status=502)
        pushed_at = await tg.push(*(tg.dm(chat_id, f"owed to {chat_id}") for chat_id in ids))

        def answered() -> Counter[int]:
            return Counter(int(r["chat_id"]) for r in tg.sent if int(r["chat_id"]) in set(ids))

        await settle(lambda: len(answered()) == chats, lambda: len(tg.sent), quiet=QUIET, timeout=TIMEOUT,
                     interval=0.1)
        await settle(lambda: False, lambda: len(tg.sent), quiet=2.0, timeout=2.0)  # late duplicates, if any
        counted = answered()
        attempts = len(await tg.calls("sendMessage"))
        last = max((float(r["time"]) for r in tg.sent if int(r["chat_id"]) in counted), default=None)
    lost = chats - len(counted)
    duplicated = sum(n - 1 for n in counted.values())
    return [
        Figure(NAME, f"lost ({chats} answers, {outage:.0f} s of 502s)", lost, goal=Goal("=", 0)),
        Figure(NAME, "duplicated", duplicated, goal=Goal("=", 0)),
        Figure(NAME, "recovery to the last delivery", None if last is None else max(0.0, last - until), "s",
               note="" if last is not None else "nothing was delivered"),
        Figure(NAME, "sendMessage attempts (incl. failed)", attempts),
        Figure(NAME, "model requests", len(llm.reports)),
        Figure(NAME, "push to the last delivery", None if last is None else last - pushed_at, "s"),
    ]
