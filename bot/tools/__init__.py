"""Tools the model can call: the port (``base``), the registry and runner, the built-ins
(``builtin_registry``; extras register on it the same way, ``registry.register(my_tool)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.tools.base import DEFAULT_TIMEOUTS, Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.exec import KILL_GRACE, MAX_TIMEOUT, SETTLE_WAIT, make_exec_tool
from bot.tools.files import edit_file, read_file, write_file
from bot.tools.find import list_files, search_files
from bot.tools.memory import memory_get, memory_search
from bot.tools.policy import ToolPolicy, ToolRules, policy_for
from bot.tools.registry import RepeatDetector, ToolRegistry
from bot.tools.sandbox import ExecSettings, require_sandbox
from bot.tools.web import web_fetch_tool

if TYPE_CHECKING:
    from bot.config.tools import ToolsConfig, WebFetchConfig

__all__ = [
    "DEFAULT_TIMEOUTS",
    "ExecSettings",
    "RepeatDetector",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolError",
    "ToolPolicy",
    "ToolRules",
    "ToolRegistry",
    "builtin_registry",
    "policy_for",
    "registry_from_config",
    "require_sandbox",
    "tool",
]

# the registry's own limit on exec sits above the tool's cap plus its kill and clean-up time,
# so a command the tool times out reports its output instead of being cut off by the registry
_EXEC_REGISTRY_TIMEOUT = MAX_TIMEOUT + KILL_GRACE + 2 * SETTLE_WAIT + 5.0


def builtin_registry(
    *, exec_enabled: bool = False, web_fetch: WebFetchConfig | None = None,
    timeouts: Mapping[ToolCategory, float] | None = None, exec_settings: ExecSettings = ExecSettings(),
) -> ToolRegistry:
    """A new registry holding the built-in tools: the file tools (read, write, edit, list,
    search), the memory tools, ``web_fetch`` only when given its settings, and ``exec``
    only when ``exec_enabled`` (both off by default: one reaches the network, the other
    runs shell commands), built for ``exec_settings`` (default: bubblewrap sandbox, no
    network, owners only)."""
    tools = (read_file, write_file, edit_file, list_files, search_files, memory_search, memory_get,
             *((web_fetch_tool(web_fetch),) if web_fetch is not None else ()))
    if not exec_enabled:
        return ToolRegistry(tools, timeouts=timeouts)
    limits = {ToolCategory.EXEC: _EXEC_REGISTRY_TIMEOUT, **(timeouts or {})}
    return ToolRegistry((*tools, make_exec_tool(exec_settings)), timeouts=limits)


def registry_from_config(config: ToolsConfig, exec_settings: ExecSettings) -> ToolRegistry:
    """The built-in registry as ``tools:`` in the config asks (exec and web_fetch switched
    on there); the per-run policy is applied later, with ``ToolRegistry.restricted``."""
    web = config.web_fetch
    # the registry's own limit must not cut web_fetch before its own timeout says what happened
    timeouts = {ToolCategory.NETWORK: web.timeout + 5.0} if web.enabled else None
    return builtin_registry(exec_enabled=config.exec.enabled, web_fetch=web if web.enabled else None,
                            timeouts=timeouts, exec_settings=exec_settings)
