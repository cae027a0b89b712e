"""history: does one turn get slower as a conversation's stored history grows?"""

from __future__ import annotations

import statistics
from pathlib import Path

from bench.common import running_stack
from bench.report import Figure, Goal
from bot.llm import Message
from bot.store.base import Turn
from bot.store.sqlite import SQLiteStore

NAME = "history"
HOW = ("Before the bot starts, three DM sessions get 10, 1,000 and 10,000 stored messages (user/assistant turns "
       "appended with SQLiteStore to agent:main:telegram:dm:<chat>); then rounds of one message to each of the three "
       "(first round not counted), 15 rounds (quick: 5); the median push-to-sendMessage per size. The model answers "
       "at once; agent.history_turns at its default (40), so the 10-message session sends 5 turns to the model "
       "and the others 40: 10,000 vs 1,000 compares the store alone.")
SIZES = (10, 1_000, 10_000)
FIRST_CHAT = 8000


async def prefill(db: Path, chat_id: int, messages: int) -> None:
    async with SQLiteStore(db) as store:
        session = await store.session(f"agent:main:telegram:dm:{chat_id}")
        for n in range(messages // 2):
            user = Message.user(f"Question {n}: what did we say about item {n} of the list earlier?")
            answer = Message.assistant(f"Answer {n}: item {n} is " + "a fairly ordinary sentence of reply. " * 4)
            await store.append_turn(Turn(session, f"prefill-{chat_id}-{n}", (user, answer), model="fake-model"))


async def run(quick: bool) -> list[Figure]:
    rounds = 5 if quick else 15
    chats = {size: FIRST_CHAT + i for i, size in enumerate(SIZES)}
    latencies: dict[int, list[float]] = {size: [] for size in SIZES}
    async with running_stack() as stack:
        for size, chat_id in chats.items():
            await prefill(stack.db, chat_id, size)
        await stack.start_bot()
        for n in range(rounds + 1):
            for size, chat_id in chats.items():
                pushed_at, reply = await stack.ask(chat_id, f"round {n}")
                if n:
                    latencies[size].append(reply["time"] - pushed_at)
    medians = {size: statistics.median(values) for size, values in latencies.items()}
    return [
        *(Figure(NAME, f"one turn with {size:,} stored messages, median", medians[size] * 1000, "ms")
          for size in SIZES),
        Figure(NAME, f"{SIZES[-1]:,} vs {SIZES[0]} stored messages", medians[SIZES[-1]] / medians[SIZES[0]], "x",
               Goal("<", 1.2)),
        Figure(NAME, f"{SIZES[-1]:,} vs {SIZES[1]:,} (the same 40 turns sent)", medians[SIZES[-1]] / medians[SIZES[1]],
               "x"),
    ]
