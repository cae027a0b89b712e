"""pattern_size: what a regular expression compiles to with its counted repeats unrolled."""

from __future__ import annotations

import pytest
import regex

from bot.tools.find import MAX_PATTERN_UNITS
from bot.tools.pattern_size import blunt_size, expanded_size

ORDINARY = [  # (pattern, units): what a model searches for passes, counted as the tree says
    ("TODO|FIXME", 9),
    (r"def \w+_test", 10),
    (r"\w{1,64}", 64),
    (r"[0-9]{4}-[0-9]{2}", 7),
    (r"(foo|bar){2,3}", 18),  # an alternation adds its branches, the repeat multiplies the group
    (r"(?:ab|cd){3}x", 13),
    (r"x*y+z?", 3),  # open and optional repeats are not unrolled
    (r"x{1000,}", 1000),  # an open repeat counts its minimum
    (r"[abc]", 3),  # a set counts its members
    (r"\p{L}{2,5}", 5),  # regex-only syntax is read too
    (r"(?:x{400}){e<=1}", 400),  # a fuzzy constraint is not a repeat
    (r"(x{400})(?1){400}", 800),  # a call to a group is not inlined
    (r"(?:x{1000}){100}", 100_000),  # the budget itself still passes
]

TOO_BIG = [  # nested counted repeats multiply, wherever the syntax hides them
    (r"(?:x{5000}){5000}", 25_000_000),
    (r"(?:x{65535}){65535}", 65535 * 65535),
    (r"(?:(?:x{50}){50}){50}", 125_000),
    (r"(?:a|bc|def{100}){1000}", 105_000),  # 1 + 2 + (2 + 100) units per round
    (r"(?=(?:x{400}){400})", 160_000),  # inside a lookahead
    (r"(?(?=a)(?:x{400}){400}|b)", 160_002),  # inside a conditional
    ("(?x)(?:x{ 400 }){ 4 00 }", 160_000),  # verbose mode: regex skips spaces even inside the braces
    ("(?x)(?:x{400}) # a comment\n {400}", 160_000),
    (r"\p{L}(?:x{400}){400}", 160_001),  # syntax the stdlib parser does not know
    (r"(?V1)[[a]--[b]](?:x{400}){400}", 160_002),  # a nested set (version 1)
    (r"[[](?:x{400}[[:alpha:])]){400}", 160_801),  # a POSIX class hiding a ) in a version-0 set
]


@pytest.mark.parametrize(("pattern", "units"), ORDINARY + TOO_BIG)
def test_expanded_size(pattern: str, units: int) -> None:
    assert expanded_size(pattern) == units
    assert (units <= MAX_PATTERN_UNITS) == ((pattern, units) in ORDINARY)


@pytest.mark.parametrize("pattern", ["(unclosed", "x{5}{5}", "x{3,1}", r"\p{NoSuchProperty}",
                                     "a)(?:x{5000}){5000}"])  # not measured up to the stray ")" only
def test_an_invalid_pattern_raises_as_compile_would(pattern: str) -> None:
    with pytest.raises(regex.error):
        expanded_size(pattern)


def test_the_flags_are_the_ones_compile_gets() -> None:
    assert expanded_size(r"[[a]--[b]]x{400}", regex.VERSION1) == 402  # one set: [a] less [b]
    assert expanded_size(r"[[a]--[b]]x{400}") == 406  # version 0: [[a], two hyphens, [b], ]


@pytest.mark.parametrize(("pattern", "units"), [*ORDINARY, *TOO_BIG, (r"\R", 8), ("(?x) a # (\n b", 2)])
def test_the_blunt_size_is_an_upper_bound(pattern: str, units: int) -> None:
    assert expanded_size(pattern) == units
    assert blunt_size(pattern) >= units


def test_without_the_regex_parser_the_blunt_size_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    def changed(*_: object) -> None:
        raise AttributeError("'Source' object has no attribute 'ignore_space'")

    monkeypatch.setattr("regex._regex_core._parse_pattern", changed)
    assert expanded_size("TODO|FIXME") == blunt_size("TODO|FIXME") == 44
    assert expanded_size(r"(?:x{5000}){5000}") > MAX_PATTERN_UNITS
    assert expanded_size(r"\w{1,64}") == blunt_size(r"\w{1,64}") == 36_000 <= MAX_PATTERN_UNITS
