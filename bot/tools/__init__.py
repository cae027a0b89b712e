"""Tools the model can call: the port (``base``), the registry and runner, the built-ins.

``builtin_registry()`` gives a fresh registry with the built-in tools; extras register
on it the same way (``registry.register(my_tool)``). The ``exec`` shell tool is off
unless asked for: ``builtin_registry(exec_enabled=True)``.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.tools.base import DEFAULT_TIMEOUTS, Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.exec import KILL_GRACE, MAX_TIMEOUT, SETTLE_WAIT, exec_command
from bot.tools.files import edit_file, read_file, write_file
from bot.tools.find import list_files, search_files
from bot.tools.memory import memory_get, memory_search
from bot.tools.policy import ToolPolicy, ToolRules, policy_for
from bot.tools.registry import MAX_OUTPUT_CHARS, RepeatDetector, ToolRegistry, canonical_call

__all__ = [
    "DEFAULT_TIMEOUTS",
    "EXEC_TOOLS",
    "FILE_TOOLS",
    "MEMORY_TOOLS",
    "MAX_OUTPUT_CHARS",
    "RepeatDetector",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolError",
    "ToolPolicy",
    "ToolRules",
    "ToolRegistry",
    "builtin_registry",
    "canonical_call",
    "exec_command",
    "policy_for",
    "tool",
]

FILE_TOOLS: tuple[Tool, ...] = (read_file, write_file, edit_file, list_files, search_files)
MEMORY_TOOLS: tuple[Tool, ...] = (memory_search, memory_get)
EXEC_TOOLS: tuple[Tool, ...] = (exec_command,)
# the registry's own limit on exec sits above the tool's cap plus its kill and clean-up time,
# so a command the tool times out reports its output instead of being cut off by the registry
_EXEC_REGISTRY_TIMEOUT = MAX_TIMEOUT + KILL_GRACE + 2 * SETTLE_WAIT + 5.0


def builtin_registry(
    *, exec_enabled: bool = False, timeouts: Mapping[ToolCategory, float] | None = None,
) -> ToolRegistry:
    """A new registry holding the built-in tools: the file tools (read, write, edit, list,
    search), the memory tools, and ``exec`` only when ``exec_enabled`` (off by default: it
    runs shell commands)."""
    if not exec_enabled:
        return ToolRegistry(FILE_TOOLS + MEMORY_TOOLS, timeouts=timeouts)
    limits = {ToolCategory.EXEC: _EXEC_REGISTRY_TIMEOUT, **(timeouts or {})}
    return ToolRegistry(FILE_TOOLS + MEMORY_TOOLS + EXEC_TOOLS, timeouts=limits)
