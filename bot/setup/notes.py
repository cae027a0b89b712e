"""The comments of ``config.example.yaml``, by dotted key: the one source of the configuration
reference's descriptions (``bot.setup.reference``), read the way a person reads the file.

A key line (``key: value  # comment``, or the same commented out: ``# key: value``) opens a
note: its trailing comment, the comment lines under it in the same column, and the comment
lines just above it at its own indentation. Indentation gives the nesting (a commented-out
key's counted without its ``# ``); a commented sample entry of a map (``#  fast:`` under
``models:``) or of a list (``# - tools: [...]``) nests its keys as ``<name>`` and ``[]``. A live
key's value, read as YAML, is what the example shows as its
default; a commented-out key's is only an example (``shown`` is None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

_KEY = re.compile(r"^(?P<indent> *)(?P<hash># ?)?(?P<pad> *)(?P<dash>- )?(?P<key>[A-Za-z_][A-Za-z0-9_-]*|\"[^\"]+\")"
                  r":(?:\s+(?P<rest>.*))?$")

Path = tuple[str, ...]
CONTINUED = 24  # a comment line this far right, under a key without a comment of its own, is its note


@dataclass
class Note:
    text: list[str]
    live: bool  # a key of the file, not a commented sample
    shown: object = None  # its value in the example, as YAML reads it (live keys)
    column: int = -1  # where its trailing comment starts (continuation lines line up there)


def _split(rest: str) -> tuple[str, str | None]:
    """``value  # comment`` -> (value, comment); a ``#`` inside quotes is part of the value."""
    quote = ""
    for i, ch in enumerate(rest):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1] == " "):
            return rest[:i].rstrip(), rest[i + 1:].strip()
    return rest.rstrip(), None


def read(text: str) -> dict[Path, Note]:
    notes: dict[Path, Note] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the open keys
    above: list[str] = []  # comment lines waiting for the key under them
    last: Note | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            above, last = [], None
            continue
        hash_at = line.find("#")
        # a commented-out sample's comment goes on as "#    # more", its second "#" under the first
        inner = line.find("#", hash_at + 1) if stripped.startswith("#") else -1
        if last is not None and not last.live and inner == last.column and not line[hash_at + 1:inner].strip():
            last.text.append(line[inner + 1:].strip())
            continue
        if stripped.startswith("#") and last is not None and (
                hash_at == last.column or (last.column == -1 and hash_at >= CONTINUED)):
            last.text.append(stripped[1:].strip())  # a continuation of the key's comment
            last.column = hash_at
            continue
        m = _KEY.match(line)
        if m is None or (m["hash"] and m["dash"] is None and not m["pad"] and len(m["indent"]) > 30):
            if stripped.startswith("#"):
                above.append(stripped.lstrip("#").strip())
            last = None
            continue
        live = m["hash"] is None
        indent = m.start("key") - (0 if live else 2)  # `# key:` and `#   key:` nest as if "# " were gone
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = m["key"].strip('"')
        if m["dash"] and stack:
            stack.append((indent - 1, "[]"))
        parents = [k for _, k in stack]
        value, comment = _split(m["rest"] or "")
        path = (*parents, key)
        text_lines = [*above, *([comment] if comment else [])]
        note = Note(text_lines, live, column=line.find("#", m.start("rest") + len(value)) if comment else -1)
        if live and value:
            try:
                note.shown = yaml.safe_load(value)
            except yaml.YAMLError:
                note.shown = value
        if path not in notes or (live and not notes[path].live):
            notes[path] = note
        stack.append((indent, key))
        above, last = [], note
    return notes
