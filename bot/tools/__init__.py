"""Tools the model can call: the port (``base``), the registry and runner, the built-ins.

``builtin_registry()`` gives a fresh registry with the built-in tools; extras register
on it the same way (``registry.register(my_tool)``). The ``exec`` shell tool is off
unless asked for: ``builtin_registry(exec_enabled=True, exec_settings=...)`` (sandboxed and for
owners only unless the settings say otherwise; see ``bot.tools.sandbox``).
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.tools.base import DEFAULT_TIMEOUTS, Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.exec import KILL_GRACE, MAX_TIMEOUT, SETTLE_WAIT, exec_command, make_exec_tool
from bot.tools.files import list_files, read_file, write_file
from bot.tools.sandbox import ExecSettings, require_sandbox
from bot.tools.registry import MAX_OUTPUT_CHARS, RepeatDetector, ToolRegistry, canonical_call

__all__ = [
    "DEFAULT_TIMEOUTS",
    "EXEC_TOOLS",
    "ExecSettings",
    "FILE_TOOLS",
    "MAX_OUTPUT_CHARS",
    "RepeatDetector",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "builtin_registry",
    "canonical_call",
    "exec_command",
    "make_exec_tool",
    "require_sandbox",
    "tool",
]

FILE_TOOLS: tuple[Tool, ...] = (read_file, write_file, list_files)
EXEC_TOOLS: tuple[Tool, ...] = (exec_command,)
# the registry's own limit on exec sits above the tool's cap plus its kill and clean-up time,
# so a command the tool times out reports its output instead of being cut off by the registry
_EXEC_REGISTRY_TIMEOUT = MAX_TIMEOUT + KILL_GRACE + 2 * SETTLE_WAIT + 5.0


def builtin_registry(
    *, exec_enabled: bool = False, timeouts: Mapping[ToolCategory, float] | None = None,
    exec_settings: ExecSettings | None = None,
) -> ToolRegistry:
    """A new registry holding the built-in tools: read_file, write_file, list_files, and
    ``exec`` only when ``exec_enabled`` (off by default: it runs shell commands), built for
    ``exec_settings`` (default: bubblewrap sandbox, no network, owners only)."""
    if not exec_enabled:
        return ToolRegistry(FILE_TOOLS, timeouts=timeouts)
    limits = {ToolCategory.EXEC: _EXEC_REGISTRY_TIMEOUT, **(timeouts or {})}
    shell = exec_command if exec_settings is None else make_exec_tool(exec_settings)
    return ToolRegistry((*FILE_TOOLS, shell), timeouts=limits)
