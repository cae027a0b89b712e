"""Context management: prompt size over a long conversation, Anthropic cache reads, and
whether a turn slows down as the stored history grows.

The agent core runs in this process (Agent, the real Anthropic SDK provider, SQLite, the
file tools); the fake LLM runs in-process too (``tests.fakes.llm_server.FakeLLM``) with its
Anthropic prompt-cache simulation: prompt tokens are the request's JSON / 4 (tools, system
and messages), cache reads the longest prefix ending at a ``cache_control`` breakpoint (or
up to 20 blocks before one) that an earlier request wrote.

    python -m bench.context [--turns 300] [--rounds 60]

1. 300 turns of one DM conversation; every third turn the model calls a tool that returns
   ~20 KB, then answers. Prompt tokens per turn with compaction (defaults: 50 messages or
   75 % of the window, keep the last 4) and without it (the history pipeline alone: last
   40 turns, tool results pruned).
2. The share of prompt tokens read from the cache, with compaction, and for comparison
   with the system prompt as the only breakpoint.
3. One turn's time (agent.run, median of ``--rounds``) in a session with 10 and with
   10,000 stored messages, both sending the same 5 turns (history_turns: 5).

Nothing is asserted: figures are printed, with the goals beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.agent.compaction import SUMMARY_SYSTEM, CompactionSettings
from bot.agent.events import EventBus
from bot.agent.loop import Agent, AgentSettings, RunRequest
from bot.app import BUILTIN_TEMPLATES
from bot.conversation import Conversation
from bot.llm import Message
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import anthropic as anthropic_provider
from bot.providers import make_provider
from bot.providers.pricing import cost
from bot.store.base import Turn
from bot.store.sqlite import SQLiteStore
from bot.tools import ToolCategory, ToolContext, builtin_registry, tool
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, FakeLLM, Reply, last_user_text

MODEL = "claude-sonnet-4-5"
GOAL_RATIO = 1.2


@tool(category=ToolCategory.OTHER)
async def fetch_report(ctx: ToolContext, n: int) -> str:
    """Fetch a long report."""
    return f"Report {n}\n" + "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(360))


def _system(body: dict[str, Any]) -> str:
    system = body.get("system")
    return "".join(b.get("text", "") for b in system) if isinstance(system, list) else str(system or "")


def _after_tool(body: dict[str, Any]) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def respond(body: dict[str, Any]) -> Reply:
    if _system(body) == SUMMARY_SYSTEM:
        return Reply.text("Summary: the user asked for reports and short answers; " + "detail " * 120)
    text = last_user_text(body)
    if text.startswith("[Memory flush]"):
        return Reply.text("NO_REPLY")
    if _after_tool(body):
        return Reply.text("Here is what the report says, in three sentences. " * 3)
    n = int(text.rsplit(" ", 1)[-1]) if text.rsplit(" ", 1)[-1].isdigit() else 1
    if n % 3 == 0:
        return Reply.tool_calls([Call("fetch_report", {"n": n})])
    return Reply.text(f"A short answer to question {n}, with a little context to make it realistic. " * 2)


@dataclass
class Setup:
    agent: Agent
    store: SQLiteStore
    llm: FakeLLM


@asynccontextmanager
async def agent_setup(tmp: Path, *, compaction: bool, history_turns: int = 40) -> AsyncIterator[Setup]:
    async with FakeLLM(responder=respond, prompt_cache=True, strict_pairing=True) as llm, \
            SQLiteStore(tmp / "db.sqlite") as store:
        provider = make_provider("anthropic", api_key="bench", base_url=llm.anthropic_base_url, timeout=30,
                                 max_retries=0)
        tools = builtin_registry()
        tools.register(fetch_report)
        settings = AgentSettings("main", "anthropic", MODEL, max_tokens=1024, context_window=200_000,
                                 history_turns=history_turns, compaction=CompactionSettings(enabled=compaction))
        agent = Agent(settings, provider, store, EventBus(), tools, Workspaces(tmp / "ws", BUILTIN_TEMPLATES),
                      lambda model, usage: cost(model, usage))
        try:
            yield Setup(agent, store, llm)
        finally:
            await provider.aclose()


def message(chat: str, n: int, text: str) -> InboundMessage:
    return InboundMessage("telegram", "bot", chat, ChatType.DM, Sender(chat, "Ann"), text, f"{chat}-{n}")


async def conversation(turns: int, *, compaction: bool) -> dict[str, Any]:
    """Prompt tokens per turn (the turn's largest request), cache reads, compactions."""
    with tempfile.TemporaryDirectory() as tmp:
        async with agent_setup(Path(tmp), compaction=compaction) as s:
            per_turn: list[int] = []
            compactions = 0
            for n in range(1, turns + 1):
                session = await s.store.session("agent:main:telegram:dm:1")
                first = len(s.llm.requests)
                request = RunRequest(f"run{n}", session, Conversation.of_key(session.key), (message("1", n, f"Question {n}"),))
                result = await s.agent.complete(request)
                turn_sizes = [s.llm.reported[r.index].input for r in s.llm.requests[first:]]
                per_turn.append(max(turn_sizes))
                outcome = await s.agent.compact_after(request, result)
                compactions += outcome is not None and outcome.outcome == "compacted"
            usages = list(s.llm.reported.values())
            problems = len(s.llm.pairing_problems)
            usage = await s.store.usage(await s.store.session("agent:main:telegram:dm:1"))
    read = sum(u.cache_read for u in usages)
    total = sum(u.input for u in usages)
    return {"per_turn": per_turn, "compactions": compactions, "cache_read_share": read / total if total else 0.0,
            "pairing_problems": problems, "cost": usage.cost, "input_tokens": total}


def windows(values: list[int], size: int) -> list[str]:
    return [f"{i + 1}-{min(i + size, len(values))}: mean {statistics.mean(values[i:i + size]):,.0f} "
            f"max {max(values[i:i + size]):,}" for i in range(0, len(values), size)]


async def prefill(store: SQLiteStore, key: str, messages: int) -> None:
    session = await store.session(key)
    turns = [Turn(session, f"pre-{key}-{n}", (
        Message.user(f"Question {n}: what did we say about item {n} of the list earlier?"),
        Message.assistant(f"Answer {n}: item {n} is " + "a fairly ordinary sentence of reply. " * 4),
    ), model=MODEL) for n in range(messages // 2)]
    for t in turns:
        await store.append_turn(t)


async def turn_time(rounds: int) -> dict[int, float]:
    """Median agent.run seconds per stored-history size, same 5 turns sent."""
    sizes = (10, 10_000)
    with tempfile.TemporaryDirectory() as tmp:
        async with agent_setup(Path(tmp), compaction=False, history_turns=5) as s:
            for size in sizes:
                await prefill(s.store, f"agent:main:telegram:dm:{size}", size)
            times: dict[int, list[float]] = {size: [] for size in sizes}
            for n in range(rounds + 1):
                for size in sizes:
                    session = await s.store.session(f"agent:main:telegram:dm:{size}")
                    request = RunRequest(f"t{size}-{n}", session, Conversation.of_key(session.key),
                                         (message(str(size), n, f"Question {n * 3 + 1}"),))
                    started = time.perf_counter()
                    await s.agent.complete(request)
                    if n:  # the first round warms caches
                        times[size].append(time.perf_counter() - started)
    return {size: statistics.median(t) for size, t in times.items()}


def tokens_startup() -> tuple[float, float]:
    """Seconds to import bot.tokens and to count the first text (loading o200k), in a fresh process."""
    import subprocess
    import sys

    code = ("import time; t=time.perf_counter(); import bot.tokens as T; a=time.perf_counter();"
            "T.count_text('hello world', 'gpt-4o'); b=time.perf_counter(); print(a-t, b-a)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


async def main_async(turns: int, rounds: int) -> dict[str, Any]:
    with_c = await conversation(turns, compaction=True)
    without = await conversation(turns, compaction=False)
    original = anthropic_provider.add_cache_breakpoints
    anthropic_provider.add_cache_breakpoints = lambda wire: None  # the system prompt as the only breakpoint
    try:
        system_only = await conversation(turns, compaction=True)
    finally:
        anthropic_provider.add_cache_breakpoints = original
    times = await turn_time(rounds)
    imported, first = tokens_startup()
    first_compaction_turn = 50 // 2 + 1
    after = with_c["per_turn"][first_compaction_turn:]
    return {
        "turns": turns,
        "with_compaction": {"windows": windows(with_c["per_turn"], 50), "compactions": with_c["compactions"],
                            "max_after_first": max(after) if after else 0,
                            "mean_last_100": statistics.mean(with_c["per_turn"][-100:]),
                            "pairing_problems": with_c["pairing_problems"], "cost": with_c["cost"]},
        "without_compaction": {"windows": windows(without["per_turn"], 50),
                               "mean_last_100": statistics.mean(without["per_turn"][-100:]),
                               "pairing_problems": without["pairing_problems"], "cost": without["cost"]},
        "cache_read_share": with_c["cache_read_share"],
        "cache_read_share_system_only": system_only["cache_read_share"],
        "cost_system_only_breakpoint": system_only["cost"],
        "turn_seconds": {str(k): v for k, v in times.items()},
        "turn_ratio_10000_vs_10": times[10_000] / times[10],
        "tokens_import_seconds": imported,
        "tokens_first_count_seconds": first,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.context", description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    r = asyncio.run(main_async(args.turns, args.rounds))
    if args.json:
        print(json.dumps(r, indent=2))
        return
    w, wo = r["with_compaction"], r["without_compaction"]
    print(f"Prompt tokens per turn over {r['turns']} turns (the turn's largest request), by 50 turns:")
    print("  with compaction:    " + "\n                      ".join(w["windows"]))
    print("  without compaction: " + "\n                      ".join(wo["windows"]))
    print(f"  compactions: {w['compactions']}; largest prompt after the first: {w['max_after_first']:,}; "
          f"mean of the last 100 turns {w['mean_last_100']:,.0f} vs {wo['mean_last_100']:,.0f} without "
          f"(goal: bounded, flat after the first compaction)")
    print(f"  broken tool pairing in any request: {w['pairing_problems'] + wo['pairing_problems']} (goal: 0)")
    print(f"  cost ({MODEL} list prices): ${w['cost']:.2f} with compaction, ${wo['cost']:.2f} without")
    print(f"Cache reads with Anthropic: {r['cache_read_share']:.0%} of prompt tokens "
          f"(system prompt as the only breakpoint: {r['cache_read_share_system_only']:.0%}, "
          f"${r['cost_system_only_breakpoint']:.2f})")
    t = r["turn_seconds"]
    verdict = "met" if r["turn_ratio_10000_vs_10"] <= GOAL_RATIO else "missed"
    print(f"One turn: {t['10'] * 1000:.1f} ms at 10 stored messages, {t['10000'] * 1000:.1f} ms at 10,000 "
          f"(x{r['turn_ratio_10000_vs_10']:.2f}; goal within x{GOAL_RATIO}: {verdict})")
    print(f"Token counting start-up: import {r['tokens_import_seconds'] * 1000:.0f} ms, first count (loads "
          f"o200k_base) {r['tokens_first_count_seconds'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
