"""The MCP capability (``mcp.servers``): the hub of every configured server, offered to runs
as a toolset; ``/mcp`` and a line of ``/status``; its servers started once the channels listen.
The SDK is imported only when a server is configured (``open``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply

if TYPE_CHECKING:
    from bot.mcp.hub import McpHub


async def _servers(hub: McpHub, call: CommandCall) -> Reply:
    return Reply(hub.overview())


@asynccontextmanager
async def open_mcp(core: Core) -> AsyncIterator[McpHub]:
    from bot.agent.guard import GuardMode
    from bot.mcp.hub import McpHub
    from bot.tracing import Redactor

    cfg = core.config
    a = cfg.agent
    hub = McpHub(cfg.mcp, identity_links=a.identity_links, redact=Redactor(cfg.secret_values()),
                 log_dir=cfg.storage.path.parent / "mcp", guard=GuardMode(a.input_guard),
                 private=cfg.private_paths())
    try:
        core.toolsets.append(hub)  # offered to every run from now on (none runs before the channels start)
        yield hub
    finally:
        await hub.aclose()


SPEC = CapabilitySpec("mcp", open_mcp, enabled=lambda config: bool(config.mcp.enabled), commands=(
    CommandSpec("mcp", _servers, "the MCP servers: state, tools, last error (owners)", owners_only=True,
                capability="mcp", off="No MCP servers are configured."),
))
