"""streaming: how soon a streamed answer becomes visible, and how often its draft is edited."""

from __future__ import annotations

import asyncio
import statistics
import time

from bench.common import JSON, FakeTelegramProcess, running_stack
from bench.report import Figure, Goal

NAME = "streaming"
HOW = ("streaming: edit; the fake LLM streams 200 tokens over 2 s; one message at a time in new chats, 5 (quick: 2). "
       "First draft = the fake LLM writing its first content chunk to the draft's sendMessage at the fake Telegram. "
       "Updates of one message = its sendMessage and every editMessageText of it until the full answer shows; "
       "the figure is the most that fell in any 1 s window.")
TOKENS, SECONDS = 200, 2.0
FIRST_CHAT = 3000


def most_in_a_second(times: list[float]) -> int:
    """The most of ``times`` in any half-open window of 1 s."""
    ordered = sorted(times)
    return max((sum(1 for t in ordered[i:] if t - start < 1.0) for i, start in enumerate(ordered)), default=0)


async def run(quick: bool) -> list[Figure]:
    messages = 2 if quick else 5
    answer = ("tok " * TOKENS).strip()
    first_drafts: list[float] = []
    windows: list[int] = []
    rates: list[float] = []
    incomplete = 0
    async with running_stack("--tokens", str(TOKENS), "--stream-seconds", str(SECONDS)) as stack:
        tg, llm = stack.tg, stack.llm
        await stack.start_bot(telegram={"streaming": "edit"})
        for n in range(messages):
            chat_id, index = FIRST_CHAT + n, len(llm.reports)
            await tg.push(tg.dm(chat_id, "stream please"))
            first_token = await llm.first_token(index, timeout=10)
            (draft,) = await tg.sent_in(chat_id, 1, timeout=10)
            edits = await _edits_until(tg, draft, answer, timeout=SECONDS + 10)
            incomplete += not any(e["plain"].strip() == answer for e in edits)
            times = [draft["time"], *(e["time"] for e in edits)]
            first_drafts.append(draft["time"] - first_token)
            windows.append(most_in_a_second(times))
            rates.append(len(edits) / (times[-1] - times[0]) if len(times) > 1 else 0.0)
    figures = [
        Figure(NAME, f"first token to first draft, median ({messages} msgs)",
               statistics.median(first_drafts) * 1000, "ms", Goal("<", 250)),
        Figure(NAME, "first token to first draft, worst", max(first_drafts) * 1000, "ms", Goal("<", 250)),
        Figure(NAME, "updates of one message in any 1 s, most", max(windows), goal=Goal("<=", 1)),
        Figure(NAME, "edits per second after the draft, mean", statistics.mean(rates), "/s"),
    ]
    if incomplete:
        figures.append(Figure(NAME, "drafts never showing the whole answer", incomplete, goal=Goal("=", 0)))
    return figures


async def _edits_until(tg: FakeTelegramProcess, draft: JSON, answer: str, timeout: float) -> list[JSON]:
    """The edits of the draft message, once one shows the whole answer (or after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        edits = [e for e in await tg.edits() if e["chat_id"] == draft["chat_id"]
                 and e["message_id"] == draft["message_id"]]
        if any(e["plain"].strip() == answer for e in edits) or time.monotonic() > deadline:
            return edits
        await asyncio.sleep(0.1)
