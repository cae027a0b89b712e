"""The names MCP tools get before the model: ``mcp__<server>__<tool>``, pure.

What both OpenAI and Anthropic accept as a tool name is ``[A-Za-z0-9_-]{1,64}``; an MCP tool
may be called ``files.read`` or something 100 characters long. ``tool_names`` maps each of a
server's tool names to one that fits: characters outside the set become ``_``; a name that
is too long keeps its start and ends in a short hash of the original, and so does a name that
two originals would share after sanitising (``a.b`` and ``a_b``: the one that sorts first keeps
the plain name), so that the result is unique, stable across relistings, and the same on every
start.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

PREFIX = "mcp__"
MAX_NAME = 64
_BAD = re.compile(r"[^A-Za-z0-9_-]")
_HASH = 6  # hex characters of the suffix that keeps a shortened or clashing name unique


def _tag(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]


def sanitise(raw: str) -> str:
    return _BAD.sub("_", raw) or "_"


def tool_names(server: str, raw_names: Iterable[str]) -> dict[str, str]:
    """``{server's tool name: the name the model sees}``, unique and at most 64 characters."""
    head = f"{PREFIX}{sanitise(server)}__"
    room = MAX_NAME - len(head)
    taken: set[str] = set()
    names: dict[str, str] = {}
    for raw in sorted(set(raw_names)):
        plain = sanitise(raw)
        name = head + plain if len(plain) <= room else f"{head}{plain[:room - _HASH - 1]}_{_tag(raw)}"
        if name in taken:
            name = f"{head}{plain[:room - _HASH - 1]}_{_tag(raw)}"
        serial = 1
        while name in taken:  # a hash clash among one server's names: practically never
            serial += 1
            suffix = f"_{_tag(f'{raw}#{serial}')}"
            name = f"{head}{plain[:room - len(suffix)]}{suffix}"
        taken.add(name)
        names[raw] = name
    return names
