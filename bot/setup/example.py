"""``config.example.yaml``, written from the config models (``bot.setup.reference.keys``): every
key with its default and its description as a comment; a secret as ``${VAR}``; an optional key
that is left out by default, and entries of a map or a list, as commented-out samples (the
``examples`` of their field), each sample's keys with their descriptions the first time they
appear. Descriptions are wrapped and lined up in one column, as a person would write them.
"""

from __future__ import annotations

import textwrap
from typing import Any

import yaml
from pydantic import BaseModel

from bot.setup.keys import Key, described, keys, plain, shape

COLUMN = 33  # where a comment starts, unless the code is longer
WIDTH = 100  # what a comment is wrapped to
LONG = 66  # a line longer than this has its comment under it
Line = tuple[str, str]  # (code, its comment)

HEADER = """\
# chatgate configuration. Copy to config.yaml, set the secrets in the environment, then
# `chatgate check` shows what would start. Every key below shows its default; a commented-out
# key is a sample to copy (an optional key, or entries of a map or a list).
#
# ${VAR} is replaced by the environment variable VAR (empty if unset), ${VAR:-text} by
# VAR or, when VAR is unset or empty, by "text". Write $${ for a literal "${".
# Substitution happens inside string values only, after the YAML is parsed, so a value
# containing ':', '#' or quotes cannot break the file. A secret left out of this file is
# read from its usual variable (OPENAI_API_KEY, TELEGRAM_BOT_TOKEN, ...).
#
# Written by `python -m bot.setup.reference` from the config models, like the reference of
# every key (docs/reference/configuration.md): a key's description lives on its model."""


def flow(value: Any) -> str:
    """A value as YAML writes it on one line (quoted where YAML would read it otherwise)."""
    text = yaml.safe_dump(plain(value), default_flow_style=True, width=10**6, allow_unicode=True, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _nested(value: Any, kind: Any) -> bool:
    """Whether a sample's value is written as a block under its key (else on the key's line)."""
    if isinstance(value, list):
        return any(isinstance(item, dict) and item for item in value)
    if not isinstance(value, dict) or not value:
        return False
    if isinstance(kind, tuple):  # a map's entries, each on a line of its own
        return kind[0] == "map"
    return isinstance(kind, type) and len(value) > 2


def block(value: Any, kind: Any, indent: int = 0, seen: set[tuple[type, str]] | None = None) -> list[Line]:
    """``value`` in block style, a model's keys described the first time they appear."""
    seen = set() if seen is None else seen
    pad, out = " " * indent, []
    if isinstance(value, list):
        inner = kind[1] if isinstance(kind, tuple) and kind[0] == "list" else None
        for item in value:
            if isinstance(item, dict) and item:
                lines = block(item, inner, indent + 2, seen)
                lines[0] = (f"{pad}- {lines[0][0].lstrip()}", lines[0][1])
                out += lines
            else:
                out.append((f"{pad}- {flow(item)}", ""))
        return out
    for name, item in value.items():
        text, sub = "", None
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            fields = {f.alias or n: (n, f) for n, f in kind.model_fields.items()}
            if name in fields:
                field_name, field = fields[name]
                sub = shape(field.annotation)
                if (kind, name) not in seen:
                    seen.add((kind, name))
                    text = described(kind, field_name, field)[0]
        elif isinstance(kind, tuple) and kind[0] == "map":
            sub = kind[1]
        entry = isinstance(kind, tuple) and isinstance(sub, type) and isinstance(item, dict) and bool(item)
        if entry or _nested(item, sub):  # a map's entry with keys of its own is a block of them
            out.append((f"{pad}{name}:", text))
            out += block(item, sub, indent + 2, seen)
        else:
            out.append((f"{pad}{name}: {flow(item)}", text))
    return out


def sample_lines(key: Key) -> list[Line]:
    """The sample of ``key`` (its first example), from its name down, at indent 0."""
    example, kind = key.examples[0], shape(key.annotation)
    if key.named:  # named entries stand where the key would
        return block(example, kind)
    if _nested(example, kind):
        return [(f"{key.path[-1]}:", ""), *block(example, kind, 2)]
    return [(f"{key.path[-1]}: {flow(example)}", "")]


def comment(code: str, text: str, hashed: str = "") -> list[str]:
    """``code`` with ``text`` as its comment, wrapped and lined up; ``hashed`` is the start of a
    commented-out line (its indentation and ``#``), which its comment's next lines begin with too."""
    if not text:
        return [code]
    below = len(code) + 2 > LONG  # a long line: its comment goes under it
    column = COLUMN if below else max(COLUMN, len(code) + 2)
    parts = textwrap.wrap(text, WIDTH - column - 2, break_long_words=False, break_on_hyphens=False)
    rest = (hashed.rstrip() if hashed else "").ljust(column)
    first = [code] if below else [code.ljust(column) + "# " + parts.pop(0)]
    return [*first, *(rest + "# " + part for part in parts)]


def _commented(lines: list[Line], indent: str, first: str = "") -> list[str]:
    """Sample lines commented out at ``indent``; ``first`` describes the first one."""
    hashed = indent + "# "
    out: list[str] = []
    for i, (code, text) in enumerate(lines):
        out += comment(hashed + code, text or (first if i == 0 else ""), hashed)
    return out


def example(model: type[BaseModel]) -> str:
    out = [HEADER]
    for key in keys(model):
        indent = "  " * (len(key.path) - 1)
        name = key.path[-1]
        if key.named and not any(p in ("<name>", "[]") for p in key.path[:-1]) and key.examples:
            out += _commented(sample_lines(key), indent, key.description)
            continue
        if key.sample:
            continue
        if len(key.path) == 1:
            out.append("")
        if key.section and key.default is not None:
            out += comment(f"{indent}{name}:", key.description)
            continue
        if key.examples and key.default is None:  # left out by default: only the sample
            out += _commented(sample_lines(key), indent, key.description)
            continue
        value = f"${{{key.env}}}" if key.env else flow(key.default)
        out += comment(f"{indent}{name}: {value}", key.description)
        if key.examples:
            out += _commented(sample_lines(key), indent)
    return "\n".join(out) + "\n"
