"""Toolsets: tools that depend on whom a run is for (MCP servers, skills).

The built-in registry is the same for every run, narrowed by the run's ``ToolPolicy``.
A ``Toolset`` is asked once per run, before its first model call, what it offers that
run (its ``ToolContext`` says who, where and under which policy). The agent narrows the
offered tools by the same policy as the built-ins, so a toolset decides *who may* (grants)
and the policy decides *which* (``tools.allow``/``tools.deny``). Held tools are the run's
too, but neither offered nor callable until a tool of the offer enables them by name through
``ToolContext.held`` (the MCP servers' ``mcp_tool_search``, when they have more tools than fit
in a prompt). A replacing tool (recall's ``memory_search``) takes the place only of one the
run has, so a tool the policy withholds stays withheld. A toolset that is also ``AddsContext``
is asked, once per turn of people's messages, for text put into that turn before the model
sees it (recall's passages from memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bot.tools.base import Tool, ToolContext


@dataclass(frozen=True, slots=True)
class Offer:
    """What a toolset offers one run: tools, and a prompt section ("" for none) that the
    system prompt shows after the tool list (it should change rarely: it is cached), and
    tools held back until enabled."""

    tools: tuple[Tool, ...] = ()
    prompt: str = ""
    held: tuple[Tool, ...] = ()
    replacing: tuple[Tool, ...] = ()  # each in place of the run's tool of its name, if it has one


NOTHING = Offer()


class Toolset(Protocol):
    """A source of tools for a run; ``offer`` must be quick (no I/O): it runs per run."""

    def offer(self, ctx: ToolContext) -> Offer: ...


@runtime_checkable
class AddsContext(Protocol):
    """A toolset that puts context into a turn of people's messages (not a task's)."""

    async def context(self, ctx: ToolContext, text: str) -> str:
        """What to put before the turn's text ("" for nothing): marked as context with its source,
        never as instructions, already through the input guard. A failure costs the turn nothing
        but the context (logged)."""
