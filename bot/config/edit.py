"""A config file edited as text, not re-dumped, so that the operator's comments and layout stay:
the lines of a block-style YAML mapping found by indent (``find`` a key, the ``block`` under it,
its children's indent, a line's ``value``). A layout these do not understand (flow mappings,
tabs) is for the caller to refuse (``chatgate dashboard passwd`` prints the lines to paste)."""

from __future__ import annotations

import re

_COMMENT_OR_BLANK = re.compile(r"\s*(#.*)?$")


def indent_of(line: str) -> int:
    """How many spaces begin ``line``."""
    return len(line) - len(line.lstrip(" "))


def is_content(line: str) -> bool:
    return not _COMMENT_OR_BLANK.fullmatch(line)


def block(lines: list[str], start: int, indent: int) -> int:
    """The end (exclusive) of the block under ``lines[start]``: up to the next content line
    indented ``indent`` or less."""
    end = start + 1
    for i in range(start + 1, len(lines)):
        if is_content(lines[i]):
            if indent_of(lines[i]) <= indent:
                break
            end = i + 1
    return end


def find(lines: list[str], start: int, end: int, indent: int, key: str) -> int | None:
    """The line of ``key:`` at exactly ``indent`` between ``start`` and ``end``."""
    pattern = re.compile(rf"{' ' * indent}{re.escape(key)}\s*:(.*)$")
    return next((i for i in range(start, end) if pattern.match(lines[i])), None)


def value(line: str) -> str:
    """What follows ``key:`` on its line, comment stripped."""
    after = line.split(":", 1)[1]
    return re.sub(r"\s+#.*$", "", after).strip()


def child_indent(lines: list[str], start: int, end: int, parent: int) -> int:
    """The indent of the first content line after ``lines[start]``, else ``parent`` + 2."""
    return next((indent_of(line) for line in lines[start + 1:end] if is_content(line)), parent + 2)
