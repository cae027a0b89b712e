"""A page as the model reads it: Playwright's accessibility snapshot with numbered references.

Playwright's AI snapshot (``page.aria_snapshot(mode="ai")``) is the page's accessibility
tree as YAML lines (``- button "Send" [ref=e10]``), every element with a reference of its
own (``e10``, ``f1e2`` inside a frame). ``number_refs`` keeps a reference only on what can
be acted on (a link, a button, a field, a choice, or what the page made clickable), numbers
those 1, 2, 3 ... in page order, and drops the rest of the markers, so the model reads
``- button "Send" [3]`` and answers ``click 3``. ``Refs`` maps the numbers back to
Playwright's references (``aria-ref=e10``), valid until the next snapshot. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACTIONABLE = frozenset({
    "link", "button", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox", "option", "menuitem",
    "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton", "treeitem", "gridcell",
})
_LINE = re.compile(r"^(?P<indent>\s*)- (?P<role>[a-z]+)\b(?P<rest>.*)$")
_REF = re.compile(r" \[ref=(?P<ref>[a-z0-9]+)\]")
_NOISE = re.compile(r" \[(?:cursor=pointer|active)\]")


@dataclass(frozen=True, slots=True)
class Refs:
    """Numbers of one snapshot -> Playwright's references (``e10``), with role and line."""

    targets: tuple[tuple[str, str, str], ...] = ()  # (ref, role, the line as shown), number n at n - 1

    def target(self, number: int) -> tuple[str, str, str] | None:
        return self.targets[number - 1] if 1 <= number <= len(self.targets) else None


def number_refs(snapshot: str) -> tuple[str, Refs]:
    """The snapshot with actionable elements numbered ``[n]`` and other markers dropped."""
    lines: list[str] = []
    targets: list[tuple[str, str, str]] = []
    for line in snapshot.splitlines():
        match = _REF.search(line)
        ref = match.group("ref") if match else None
        parsed = _LINE.match(line)
        role = parsed.group("role") if parsed else ""
        pointer = "[cursor=pointer]" in line
        line = _NOISE.sub("", _REF.sub("", line))
        if ref is not None and (role in ACTIONABLE or (pointer and role in ("generic", "img", "listitem", "cell"))):
            targets.append((ref, role, line.strip()[2:].rstrip(":")))
            line = _with_number(line, len(targets))
        lines.append(line)
    return "\n".join(lines), Refs(tuple(targets))


def _with_number(line: str, number: int) -> str:
    """``- button "Send":`` -> ``- button "Send" [3]:``; after the name and the states."""
    if line.endswith(":"):
        return f"{line[:-1]} [{number}]:"
    head, sep, text = line.partition(": ")  # ``- link "x": text`` has its text after the colon
    if sep and not head.strip().startswith("- text"):
        return f"{head} [{number}]: {text}"
    return f"{line} [{number}]"


def cut(text: str, budget: int) -> str:
    """``text`` within ``budget`` characters, cut at a line, saying how much was left out."""
    if len(text) <= budget:
        return text
    kept = text[:budget]
    if "\n" in kept:
        kept = kept[:kept.rfind("\n")]
    return (f"{kept}\n[snapshot cut at {len(kept):,} of {len(text):,} characters: scroll, or wait for "
            f"what you need, and take a snapshot again]")
