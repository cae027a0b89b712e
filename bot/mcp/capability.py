"""The MCP capability (``mcp.servers``): the hub of every configured server, offered to runs
as a toolset; ``/mcp`` and a line of ``/status``; its servers started once the channels listen.
The SDK is imported only when a server is configured (``open``)."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply
from bot.mcp.config import McpConfig

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig
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
    hub = McpHub(cfg.section("mcp", McpConfig), identity_links=a.identity_links, redact=Redactor(cfg.secret_values()),
                 log_dir=cfg.storage.path.parent / "mcp", guard=GuardMode(a.input_guard),
                 private=cfg.private_paths())
    try:
        core.toolsets.append(hub)  # offered to every run from now on (none runs before the channels start)
        yield hub
    finally:
        await hub.aclose()


async def servers_now(config: CoreConfig) -> list[str]:
    """Connect to every enabled MCP server at once, wait for each one's first attempt (its
    ``connect_timeout`` at most), and say how each is: state, tools, last error."""
    mcp = config.section("mcp", McpConfig)
    if not mcp.enabled:
        return ["No MCP servers are configured (mcp.servers)."]
    import tempfile

    from bot.mcp.hub import McpHub
    from bot.tracing import Redactor

    wait = max(s.connect_timeout for s in mcp.enabled.values()) + 1.0
    with tempfile.TemporaryDirectory(prefix="chatgate-mcp-") as logs:  # the servers' stderr, for their last words
        async with McpHub(mcp, log_dir=Path(logs), redact=Redactor(config.secret_values())) as hub:
            await hub.settled(wait)
            return [hub.overview()]


async def _show(config: CoreConfig, args: argparse.Namespace) -> int:
    print("\n".join(await servers_now(config)))
    return 0


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    mcp = sub.add_parser("mcp", help="connect to the MCP servers and show their state, tools and last error")
    mcp.add_argument("-c", "--config", required=True, help="path to config.yaml")
    mcp.set_defaults(run=_show)


def _enabled(config: CoreConfig) -> bool:
    return bool(config.section("mcp", McpConfig).enabled)


SPEC = CapabilitySpec("mcp", open_mcp, enabled=_enabled, config=McpConfig, cli=_cli, probe=servers_now, commands=(
    CommandSpec("mcp", _servers, "the MCP servers: state, tools, last error (owners)", owners_only=True,
                capability="mcp", off="No MCP servers are configured."),
))
