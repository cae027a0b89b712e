"""How big a regular expression grows when compiled: ``expanded_size(pattern)``, a pure function.

The ``regex`` module unrolls counted repeats when it compiles, in C and holding the GIL:
``(?:x{5000}){5000}`` becomes 25 million steps, seconds and gigabytes before any text is
searched, and no thread or timeout can stop it. So ``search_files`` measures a pattern first
and refuses it over a budget. A unit is one leaf of the pattern's tree (a character, a set
member, an escape, a reference); anything else adds up its parts; a repeat multiplies its
body by its upper bound (an open one, ``{m,}``, by ``m``).

The tree is the one ``regex`` itself parses (pure Python, linear, no unrolling), so the
measure reads exactly the syntax that will be compiled: its verbose mode, which skips
spaces and comments even inside ``{ 2, 3 }``, its nested sets, fuzzy constraints and
``\\p{..}``. The stdlib parser (``re._parser``) reads several of these otherwise without
failing, and would under-count them. The parser is private to ``regex``: should it ever
change shape, ``blunt_size`` takes over, an upper bound that needs no parser at all.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

_DIGITS = frozenset("0123456789")


def expanded_size(pattern: str, flags: int = 0) -> int:
    """The units ``pattern`` compiles to, at worst (see the module docstring).

    Raises ``regex.error`` (or ``RecursionError``) when the pattern is not valid, as
    ``regex.compile`` would."""
    import regex

    try:
        from regex import _regex_core as core

        return _tree_size(_parse(core, pattern, flags), core)
    except (regex.error, RecursionError):
        raise
    except Exception:  # regex's private parser changed shape: measure without it, never "allow"
        log.warning("cannot read the regex module's parse tree; measuring the pattern without it", exc_info=True)
        return blunt_size(pattern)


def _parse(core: Any, pattern: str, flags: int) -> Any:
    """``regex``'s own parse, as ``regex.compile`` runs it (``regex._main._compile``)."""
    global_flags = flags
    while True:
        source = core.Source(pattern)
        info = core.Info(global_flags, source.char_type, {})
        info.guess_encoding = core.UNICODE
        source.ignore_space = bool(info.flags & core.VERBOSE)
        try:
            tree = core._parse_pattern(source, info)
        except core._UnscopedFlagSet:  # a global flag such as (?V1) met on the way: again, with it
            global_flags = info.global_flags
            continue
        if not source.at_end():  # the parse stops at a ")" that closes nothing
            raise core.error("unbalanced parenthesis", pattern, source.pos)
        return tree


def _tree_size(node: Any, core: Any) -> int:
    if isinstance(node, core.GreedyRepeat):  # lazy and possessive repeats are kinds of it
        factor = node.max_count if node.max_count is not None else node.min_count
        return _tree_size(node.subpattern, core) * max(factor, 1)
    parts = [_tree_size(child, core) for child in _children(node, core)]
    return sum(parts) if parts else 1


def _children(node: Any, core: Any) -> list[Any]:
    found: list[Any] = []
    for value in vars(node).values():
        if isinstance(value, core.RegexBase):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found += [item for item in value if isinstance(item, core.RegexBase)]
    return found


def blunt_size(pattern: str) -> int:
    """An upper bound of ``expanded_size`` that reads no syntax: every count is made of the
    pattern's own digits, so all counts multiplied stay under ten to the number of digits,
    and no character makes more than four leaves (``\\R``, any line break, makes 8 of 2)."""
    return 4 * (len(pattern) + 1) * 10 ** sum(char in _DIGITS for char in pattern)
