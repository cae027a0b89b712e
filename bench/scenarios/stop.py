"""stop: /stop sent as a Telegram update while an answer streams."""

from __future__ import annotations

import asyncio

from bench.common import Stack, percentiles, running_stack
from bench.report import Figure, Goal
from tests.fakes.llm_server import Reply

NAME = "stop"
HOW = ("50 stops (quick: 10) for each streaming mode (off, edit), one at a time, each in a new chat: a message "
       "whose answer streams 500 words (a chunk every 20 ms), and once the fake LLM has written its first chunk "
       "(with edit: and the draft is out) and 100 ms more, /stop. Timed from the push of /stop (fake Telegram) to "
       "the fake LLM seeing the client go away, and to \"Stopped.\" arriving as a sendMessage; with edit, the "
       "stopped draft's last edit comes after it, keeping the edit interval.")
FIRST_CHAT = 4000
MID_STREAM = 0.1  # seconds after the first chunk
PEER = {"off": ("227 ms", "238 ms"), "edit": ("", "14 ms")}  # the popular peer; hermes-agent with edit


async def run(quick: bool) -> list[Figure]:
    stops = 10 if quick else 50
    figures: list[Figure] = []
    async with running_stack() as stack:
        for n, mode in enumerate(("off", "edit")):
            await stack.start_bot(telegram={"streaming": mode})
            figures += await _stops(stack, mode, FIRST_CHAT + n * 1000, stops)
    return figures


async def _stops(stack: Stack, mode: str, first_chat: int, stops: int) -> list[Figure]:
    disconnects: list[float] = []
    replies: list[float] = []
    missed = wrong = 0
    tg, llm = stack.tg, stack.llm
    await stack.ask(first_chat - 1, "warm up")
    for n in range(stops):
        chat_id, index = first_chat + n, len(llm.reports)
        await llm.script(Reply.text("word " * 500, delay=0.02))
        await tg.push(tg.dm(chat_id, "write a long answer"))
        await llm.first_token(index, timeout=10)
        if mode == "edit":
            await tg.sent_in(chat_id, 1, 10)  # the draft
        await asyncio.sleep(MID_STREAM)
        pushed_at, stopped = await stack.ask(chat_id, "/stop")
        gone = await llm.disconnected(index, timeout=5)
        replies.append(stopped["time"] - pushed_at)
        wrong += stopped["plain"] != "Stopped."
        if gone is None:
            missed += 1
        else:
            disconnects.append(gone - pushed_at)
    disconnect = percentiles(disconnects) if disconnects else None
    reply = percentiles(replies)
    closed_peer, stopped_peer = PEER[mode]
    where = f"streaming: {mode}"
    figures = [
        Figure(NAME, f"{where}: /stop to stream closed, p50 ({len(disconnects)} stops)",
               disconnect and disconnect["p50"] * 1000, "ms"),
        Figure(NAME, f"{where}: /stop to stream closed, p99", disconnect and disconnect["p99"] * 1000, "ms",
               Goal("<", 100), closed_peer),
        Figure(NAME, f"{where}: /stop to \"Stopped.\" sendMessage, p50 ({len(replies)} stops)", reply["p50"] * 1000,
               "ms"),
        Figure(NAME, f"{where}: /stop to \"Stopped.\" sendMessage, p99", reply["p99"] * 1000, "ms",
               Goal("<", 100), stopped_peer),
    ]
    if missed:
        figures.append(Figure(NAME, f"{where}: streams not closed within 5 s", missed, goal=Goal("=", 0)))
    if wrong:
        figures.append(Figure(NAME, f"{where}: answers to /stop other than \"Stopped.\"", wrong, goal=Goal("=", 0)))
    return figures
