"""Tools the model can call: the port (``base``), the registry and runner, the built-ins.

``builtin_registry()`` gives a fresh registry with the built-in tools; extras register
on it the same way (``registry.register(my_tool)``).
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.tools.base import DEFAULT_TIMEOUTS, Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.files import list_files, read_file, write_file
from bot.tools.registry import MAX_OUTPUT_CHARS, RepeatDetector, ToolRegistry, canonical_call

__all__ = [
    "DEFAULT_TIMEOUTS",
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
    "tool",
]

FILE_TOOLS: tuple[Tool, ...] = (read_file, write_file, list_files)


def builtin_registry(*, timeouts: Mapping[ToolCategory, float] | None = None) -> ToolRegistry:
    """A new registry holding the built-in tools (for now: read_file, write_file, list_files)."""
    return ToolRegistry(FILE_TOOLS, timeouts=timeouts)
