"""spawn: hand a self-contained task to a sub-agent and get its answer back.

A sub-agent is an ``Agent`` run (so the tool is made here: the loop imports the tool
registry, no tool imports the loop) in a child session (``<parent key>:sub:<n>``, fresh every
time) with the minimal prompt and read-only tools (``READ_ONLY_TOOLS``, narrowed further by the
parent run's own policy): it can look things up in the same workspace, never change it, run
commands or message anyone. The toolsets (MCP servers, skills) offer it what they offer its
parent's person, under the parent run's policy. Limits:

- depth: a sub-agent is never offered ``spawn`` (depth limit 1), and a ``spawn`` call
  from a session that is already a sub-agent's is refused;
- at most ``max_per_run`` (5) sub-agents per parent run, ``max_concurrent`` (8) at once
  in the process (a semaphore; the rest wait their turn);
- several ``spawn`` calls in one step run concurrently (the registry runs them so);
- the parent's ``/stop`` cancels the tool call, which cancels the child's run: its LLM
  stream is closed and its tools are cancelled, like any run's;
- each finished child is reported through ``ToolContext.on_sub_agent`` (a ``SubAgentRun``),
  which the parent's loop turns into a span with the child's tokens and cost added to
  the parent's (``TraceBuilder.sub_agent``); the child's model calls are charged to the
  parent's payers on the child's own bill, once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bot.agent.events import EventBus
from bot.agent.loop import Agent, AgentSettings, RunRequest, RunStatus
from bot.limits import Meter
from bot.providers.base import Provider
from bot.routing import Models
from bot.routing.spec import Cost
from bot.store.base import CompactingStore
from bot.tools.base import Gate, SubAgentRun, Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.policy import READ_ONLY_TOOLS, ToolPolicy, ToolRules
from bot.tools.registry import ToolRegistry
from bot.tools.toolset import Toolset
from bot.tracing import Redactor
from bot.workspace import Workspaces

log = logging.getLogger(__name__)

_RUNS_REMEMBERED = 4096  # parent runs whose child count is kept


@dataclass(frozen=True, slots=True)
class SpawnLimits:
    max_depth: int = 1
    max_per_run: int = 5
    max_concurrent: int = 8
    max_iterations: int = 10  # of one sub-agent run


class SubAgents:
    """Runs the sub-agents of every run in the process: one instance per app."""

    def __init__(self, settings: AgentSettings, provider: Provider, store: CompactingStore, tools: ToolRegistry,
                 workspaces: Workspaces, cost: Cost, redactor: Redactor | None = None,
                 limits: SpawnLimits = SpawnLimits(), meter: Meter | None = None,
                 toolsets: Sequence[Toolset] = (), gate: Gate | None = None, models: Models | None = None) -> None:
        self.settings = settings
        self._models = models  # a child runs on its parent conversation's model
        self._meter = meter
        self._toolsets = toolsets  # offered to children as to their parents, under the children's policy (live)
        self._gate = gate  # a child's calls are approved like its parent's, in the parent's chat
        self.limits = limits
        self._provider, self._store, self._tools = provider, store, tools
        self._workspaces, self._cost, self._redactor = workspaces, cost, redactor
        self._events = EventBus()  # a child's chunks and tool events are not the chat's
        self._slots = asyncio.Semaphore(limits.max_concurrent)
        self._counts: OrderedDict[str, int] = OrderedDict()
        self.active = 0  # children running now (tests watch the concurrency limit with it)

    def _next(self, run_id: str) -> int:
        n = self._counts.pop(run_id, 0) + 1
        self._counts[run_id] = n
        while len(self._counts) > _RUNS_REMEMBERED:
            self._counts.popitem(last=False)
        if n > self.limits.max_per_run:
            raise ToolError(f"at most {self.limits.max_per_run} sub-agents per request; "
                            "finish the work with the results you have, or do the rest yourself")
        return n

    def child_tools(self, policy: ToolPolicy | None) -> ToolRegistry:
        """Read-only tools, narrowed by the parent's policy when there is one."""
        read_only = ToolRules("sub-agents", allow=READ_ONLY_TOOLS)
        parent = ToolPolicy() if policy is None else policy
        return self._tools.restricted(replace(parent, rules=(*parent.rules, read_only)))

    async def run(self, ctx: ToolContext, task: str) -> SubAgentRun:
        if len(ctx.conversation.key.subs) >= self.limits.max_depth:
            raise ToolError("a sub-agent cannot start sub-agents of its own")
        n = self._next(ctx.run_id)
        child = ctx.conversation.sub(n)  # a session of its own, in the parent's workspace
        key = child.session_key
        # the minimal prompt: identity, tools, safety, workspace, time, AGENTS.md and TOOLS.md
        settings = replace(self.settings, max_iterations=min(self.settings.max_iterations, self.limits.max_iterations),
                           prompt_mode="minimal")
        agent = Agent(settings, self._provider, self._store, self._events, self.child_tools(ctx.tool_policy),
                      self._workspaces, self._cost, self._redactor, meter=self._meter, toolsets=self._toolsets,
                      gate=self._gate, models=self._models)
        async with self._slots:
            self.active += 1
            try:
                session = await self._store.session(child, fresh=True)
                started = time.time()
                log.info("sub-agent %s started session=%s run=%s", key, ctx.session_key, ctx.run_id)
                # the parent's policy narrows what the toolsets offer the child (MCP tools, skills),
                # as it narrows the child's built-ins (child_tools)
                result = await agent.complete(RunRequest(f"{ctx.run_id}-sub{n}", session, child, (), task=task,
                                                    user_id=ctx.user_id, users=ctx.people, payers=ctx.payers,
                                                    tool_policy=ctx.tool_policy, sender_is_owner=ctx.sender_is_owner))
            finally:
                self.active -= 1
        text = (result.error or result.text) if result.status is RunStatus.FAILED else result.text
        return SubAgentRun(key, result.run_id, result.status.value, text, result.usage, result.cost, started,
                           time.time() - started)


def spawn_tool(subagents: SubAgents) -> Tool:
    """The ``spawn`` tool running children through ``subagents``."""

    @tool(category=ToolCategory.AGENT, name="spawn")
    async def spawn(ctx: ToolContext, task: str) -> str:
        """Hand a self-contained task to a sub-agent and get its answer back. The sub-agent works in
        the same workspace with read-only tools (read, list, search files and memory) and sees
        nothing of this conversation, so put everything it needs in the task. Several spawn calls
        in one step run at the same time (at most 5 per request).

        Args:
            task: The whole task: what to find or work out, where to look, what to answer with.
        """
        if not task.strip():
            raise ToolError("the task is empty; say what the sub-agent should do")
        child = await subagents.run(ctx, task)
        if ctx.on_sub_agent is not None:
            ctx.on_sub_agent(child)
        log.info("sub-agent %s %s in %.2f s session=%s run=%s", child.session_key, child.status, child.seconds,
                 ctx.session_key, ctx.run_id)
        if child.status == RunStatus.FAILED:
            raise ToolError(f"the sub-agent failed: {child.text}")
        return child.text or "(the sub-agent finished without an answer)"

    return spawn
