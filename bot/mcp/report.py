"""What ``chatgate mcp``, ``chatgate check``, ``/mcp`` and ``/status`` say of the servers, pure."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from bot.mcp.state import State


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    transport: str  # stdio | http
    scope: str  # shared | per-person
    grant: str  # as configured, in words
    state: State
    tools: int  # offered (after tools.allow/deny)
    last_error: str | None
    since: float  # time.time() of the last change
    retry_at: float | None = None
    running: int = 1  # processes: per-person, how many people's are running


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def line(s: ServerStatus, now: float | None = None, *, errors: bool = True) -> str:
    now = time.time() if now is None else now
    state = s.state.value
    if s.state is State.DOWN and s.retry_at is not None:
        state += f", next attempt in {_ago(s.retry_at - now)}"
    elif s.state.usable:
        state += f" for {_ago(now - s.since)}"
    where = s.transport if s.scope == "shared" else f"{s.transport}, per person: {s.running} running"
    text = f"{s.name}: {state}, {s.tools} tool{'s' if s.tools != 1 else ''} ({where}; granted to {s.grant})"
    if errors and s.last_error and s.state is not State.READY:
        text += f"\n  last error: {s.last_error}"
    elif errors and s.last_error:
        text += f"\n  last error (recovered): {s.last_error}"
    return text


def overview(statuses: Sequence[ServerStatus], now: float | None = None) -> str:
    """Every server, state, tools and last error (``/mcp``, ``chatgate mcp``)."""
    if not statuses:
        return "No MCP servers are configured (mcp.servers)."
    return "MCP servers:\n" + "\n".join(f"- {line(s, now)}" for s in statuses)


def personal(statuses: Sequence[ServerStatus]) -> str:
    """``/status``'s line: the servers this person may use, and their state."""
    if not statuses:
        return ""
    return "MCP servers: " + ", ".join(f"{s.name} ({s.state.value}, {s.tools} tools)" for s in statuses)
