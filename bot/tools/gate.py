"""The one gate of every tool call, whoever makes it (a run, a sub-agent, the memory flush, a
task's check): with several instances, a call with side effects runs only while this instance
still holds the session's lane (a process paused past its lease must not act for a conversation
another instance took over); then each step a capability added, in the registry's order
(``add``: the operator's pre-tool hooks, then the approvals, which may ask a person). The first
refusal is the model's result; None runs the call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from bot.tools.base import Gate, Tool, ToolContext
from bot.tools.policy import READ_ONLY_TOOLS

log = logging.getLogger(__name__)


class Holds(Protocol):
    async def still_holds(self, session_key: str) -> bool:
        """This instance still holds the session's lane (its lease unchanged), now."""


class ToolGate:
    def __init__(self, holds: Holds | None = None) -> None:
        self._holds = holds
        self._steps: list[Gate] = []

    def add(self, step: Gate) -> None:
        """A capability's check, after those added before it."""
        self._steps.append(step)

    async def permit(self, ctx: ToolContext, tool: Tool, call_id: str, arguments: Mapping[str, Any]) -> str | None:
        if (self._holds is not None and not ctx.unattended and tool.name not in READ_ONLY_TOOLS
                and not await self._holds.still_holds(ctx.session_key)):  # paused past the lease
            log.warning("%s not run: this instance no longer holds the session session=%s run=%s", tool.name,
                        ctx.session_key, ctx.run_id)
            return f"{tool.name} was not run: another instance has taken this conversation over."
        for step in self._steps:
            if (refusal := await step.permit(ctx, tool, call_id, arguments)) is not None:
                return refusal
        return None
