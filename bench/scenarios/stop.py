"""stop: /stop sent as a Telegram update while an answer streams."""

from __future__ import annotations

import asyncio

from bench.common import percentiles, running_stack
from bench.report import Figure, Goal
from tests.fakes.llm_server import Reply

NAME = "stop"
HOW = ("50 stops (quick: 10), one at a time, each in a new chat: a message whose answer streams 500 words "
       "(a chunk every 20 ms, streaming: off), and once the fake LLM has written its first chunk and 100 ms "
       "more, /stop. Timed from the push of /stop (fake Telegram) to the fake LLM seeing the client go away, "
       "and to \"Stopped.\" arriving as a sendMessage.")
FIRST_CHAT = 4000
MID_STREAM = 0.1  # seconds after the first chunk


async def run(quick: bool) -> list[Figure]:
    stops = 10 if quick else 50
    disconnects: list[float] = []
    replies: list[float] = []
    missed = wrong = 0
    async with running_stack() as stack:
        tg, llm = stack.tg, stack.llm
        await stack.start_bot()
        await stack.ask(FIRST_CHAT - 1, "warm up")
        for n in range(stops):
            chat_id, index = FIRST_CHAT + n, len(llm.reports)
            await llm.script(Reply.text("word " * 500, delay=0.02))
            await tg.push(tg.dm(chat_id, "write a long answer"))
            await llm.first_token(index, timeout=10)
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
    figures = [
        Figure(NAME, f"/stop to stream closed, p50 ({len(disconnects)} stops)",
               disconnect and disconnect["p50"] * 1000, "ms"),
        Figure(NAME, "/stop to stream closed, p99", disconnect and disconnect["p99"] * 1000, "ms", Goal("<", 100),
               "227 ms"),
        Figure(NAME, f"/stop to \"Stopped.\" sendMessage, p50 ({len(replies)} stops)", reply["p50"] * 1000, "ms"),
        Figure(NAME, "/stop to \"Stopped.\" sendMessage, p99", reply["p99"] * 1000, "ms", Goal("<", 300), "238 ms"),
    ]
    if missed:
        figures.append(Figure(NAME, "streams not closed within 5 s", missed, goal=Goal("=", 0)))
    if wrong:
        figures.append(Figure(NAME, "answers to /stop other than \"Stopped.\"", wrong, goal=Goal("=", 0)))
    return figures
