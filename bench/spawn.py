"""Sub-agents: do parallel children cost more than the slowest of them, and how fast does
the parent's /stop close every child's model stream?

The agent (the real OpenAI SDK provider, SQLite, the spawn tool) runs in this process; the
fake LLM runs in a child process (``tests.fakes.llm_server --control``). Each trial is a
fresh DM session.

- parallel: the parent spawns 3 children in one step; each child calls 3 tools in one
  step (read_file, list_files, search_files), then streams its answer. Measured: the
  parent's spawn step (its slowest spawn span) against the slowest child's own run.
  Goal: within 1.1 times.
- stop: the parent spawns 3 children whose model calls hang; the parent's task is
  cancelled (what /stop does). Measured: from the cancel to the fake seeing each child's
  stream closed. Goal: p99 under 100 ms.

    python -m bench.spawn [--trials 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from bench.common import FakeLLMProcess, percentiles, table, verdict
from bot.agent.events import EventBus
from bot.agent.guard import GuardMode
from bot.agent.loop import Agent, AgentSettings, RunRequest
from bot.agent.spawn import SubAgents, spawn_tool
from bot.app import BUILTIN_TEMPLATES
from bot.conversation import Conversation
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.store.sqlite import SQLiteStore
from bot.tools import builtin_registry
from bot.tracing import Redactor, SpanKind
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, Reply

GOAL_RATIO = 1.1
GOAL_STOP_MS = 100.0
TIMEOUT = 10.0
CHILD_TOOLS = [Call("read_file", {"path": "AGENTS.md", "limit": 5}), Call("list_files", {}),
               Call("search_files", {"pattern": "the", "max_results": 5})]


class Bench:
    def __init__(self, llm: FakeLLMProcess, agent: Agent, store: SQLiteStore) -> None:
        self.llm, self.agent, self.store = llm, agent, store
        self.requests = 0  # model calls the fake has been asked for so far
        self.trials = 0

    async def start(self) -> tuple[str, asyncio.Task[object]]:
        self.trials += 1
        user = f"user{self.trials}"
        key = f"agent:main:bench:dm:{user}"
        msg = InboundMessage("bench", "bot", user, ChatType.DM, Sender(user, "Ann"), "split the work", f"m{user}")
        session = await self.store.session(key)
        inbound = await self.store.record_inbound(msg, key)
        request = RunRequest(f"run-{user}", session, Conversation.of_key(key), (msg,), (inbound,) if inbound is not None else ())
        return key, asyncio.create_task(self.agent.complete(request))

    async def parallel(self) -> tuple[float, float]:
        """(the parent's spawn step, the slowest child's run), seconds."""
        spawns = Reply.tool_calls([Call("spawn", {"task": f"look into part {i}"}) for i in range(3)])
        answer = Reply.text("the part is fine " * 10, chunk_size=16, delay=0.01)
        await self.llm.script(spawns, *[Reply.tool_calls(CHILD_TOOLS)] * 3, *[answer] * 3, Reply.text("done"))
        self.requests += 8
        key, task = await self.start()
        await asyncio.wait_for(task, TIMEOUT)
        [parent] = await self.store.traces(key, last=1)
        step = max(s.duration_ms for s in parent.spans if s.kind is SpanKind.TOOL and s.name == "spawn") / 1000
        children = [(await self.store.traces(f"{key}:sub:{n}", last=1))[0] for n in (1, 2, 3)]
        return step, max(c.ended_at - c.started_at for c in children)

    async def stop(self) -> list[float | None]:
        """Seconds from cancelling the parent to each child's stream closed (None: not within 2 s)."""
        spawns = Reply.tool_calls([Call("spawn", {"task": f"wait {i}"}) for i in range(3)])
        await self.llm.script(spawns, Reply.hang(), Reply.hang(), Reply.hang())
        first = self.requests
        self.requests += 4
        _, task = await self.start()
        for index in range(first + 1, first + 4):
            await self.llm.request(index, TIMEOUT)
        await asyncio.sleep(0.02)  # the streams are open and waiting
        cancelled = time.monotonic()
        task.cancel()
        await asyncio.wait({task})
        gone = [await self.llm.disconnected(i) for i in range(first + 1, first + 4)]
        return [None if g is None else g - cancelled for g in gone]


async def bench(trials: int, warmup: int) -> tuple[list[tuple[float, float]], list[float | None]]:
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-spawn-") as tmp:
        async with FakeLLMProcess("--control") as llm, SQLiteStore(Path(tmp) / "db.sqlite") as store:
            provider = make_provider("openai", api_key="sk-bench", base_url=llm.openai_base_url, timeout=30,
                                     max_retries=0)
            try:
                settings = AgentSettings("main", "openai", "fake-model", guard=GuardMode.OFF)
                workspaces = Workspaces(Path(tmp) / "ws", BUILTIN_TEMPLATES)
                tools = builtin_registry()
                subagents = SubAgents(settings, provider, store, tools, workspaces, lambda m, u: 0.0, Redactor())
                tools.register(spawn_tool(subagents))
                agent = Agent(settings, provider, store, EventBus(), tools, workspaces, lambda m, u: 0.0)
                b = Bench(llm, agent, store)
                parallel = [await b.parallel() for _ in range(warmup + trials)][warmup:]
                stops = [s for _ in range(warmup + trials) for s in await b.stop()][warmup * 3:]
                return parallel, stops
            finally:
                await provider.aclose()


def report(parallel: list[tuple[float, float]], stops: list[float | None]) -> None:
    ratios = [step / child for step, child in parallel]
    closed = [s * 1000 for s in stops if s is not None]
    r, c = percentiles(ratios), percentiles(closed) if closed else None
    print(f"sub-agents: {len(parallel)} parallel trials (3 children x 3 tools), {len(stops)} child streams stopped; "
          f"the agent in this process, the fake LLM in a child process; real OpenAI SDK; {os.cpu_count()} CPUs")
    rows = [["spawn step / slowest child", *(f"{r[k]:.3f}" for k in ("p50", "p90", "p99", "max"))],
            ["slowest child (ms)", *(f"{v * 1000:.0f}" for v in percentiles([ch for _, ch in parallel]).values())]]
    if c is not None:
        rows.append(["cancel -> child stream closed (ms)", *(f"{c[k]:.1f}" for k in ("p50", "p90", "p99", "max"))])
    print(table(["measure", "p50", "p90", "p99", "max"], rows))
    print(f"goal: spawn step within {GOAL_RATIO}x the slowest child (p50): {verdict(r['p50'], GOAL_RATIO)}; "
          f"child streams closed p99 < {GOAL_STOP_MS:.0f} ms: {verdict(c['p99'] if c else None, GOAL_STOP_MS)}")
    if missing := sum(s is None for s in stops):
        print(f"warning: {missing} child streams were not seen closed within 2 s")
    print(json.dumps({"bench": "spawn", "trials": len(parallel), "cpus": os.cpu_count(), "ratio": r,
                      "stop_ms": c, "not_closed": missing}, separators=(",", ":")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.spawn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30, help="measured trials of each kind")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured trials first")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    report(*asyncio.run(bench(args.trials, args.warmup)))


if __name__ == "__main__":
    main()
