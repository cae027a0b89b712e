"""The configuration reference, generated: every key of the config models (``bot.settings.Config``:
the core's sections, each platform's and each capability's) with its type, its default and
its description, written to ``docs/reference/configuration.md``.

One source each: keys, types and defaults come from the models (what ``chatgate check``
validates against); descriptions from the comments of ``config.example.yaml`` (``bot.setup.notes``),
which every key must appear in. ``problems`` says where the example and the models disagree (a
key missing from the example, or shown there with another default); ``tests/test_reference.py``
checks that there is none and that the committed reference is what ``render`` writes.

    python -m bot.setup.reference          # rewrite docs/reference/configuration.md
    python -m bot.setup.reference --check  # exit 1 when it is not current, or the example disagrees
"""

from __future__ import annotations

import argparse
import enum
import functools
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bot.setup.notes import Note, read

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "config.example.yaml"
OUTPUT = ROOT / "docs" / "reference" / "configuration.md"
KeyPath = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Key:
    path: KeyPath  # ("channels", "telegram", "token"); "<name>" for a map's entry, "[]" for a list's
    type: str
    default: str
    env: str | None  # a secret's environment variable
    section: bool  # a section (its keys follow)
    sample: bool  # inside a map's or a list's entry: the example shows it commented out, if at all


# ------------------------------------------------------------------------------ the models


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _strip(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); Annotated dropped."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = _args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in _args(tp) if a is not type(None)]
        if len(rest) < len(_args(tp)):
            inner, _ = _strip(rest[0] if len(rest) == 1 else typing.Union[tuple(rest)])
            return inner, True
    return tp, False


def _model(tp: Any) -> type[BaseModel] | None:
    tp, _ = _strip(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def type_name(tp: Any) -> str:
    tp, optional = _strip(tp)
    origin, args = typing.get_origin(tp), _args(tp)
    if origin is Literal:
        name = " \\| ".join(f"`{a}`" for a in args)
    elif origin in (tuple, list):
        name = f"list of {type_name(args[0])}" if args else "list"
    elif origin is dict:
        name = f"map of {type_name(args[0])} to {type_name(args[1])}"
    elif origin in (typing.Union, types.UnionType):
        name = " or ".join(type_name(a) for a in args)
    elif isinstance(tp, type) and issubclass(tp, SecretStr):
        name = "secret"
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        name = "section"
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        name = " \\| ".join(f"`{m.value}`" for m in tp)
    elif isinstance(tp, type):
        name = {"str": "text", "int": "integer", "float": "number", "bool": "true/false", "Path": "path",
                "PosixPath": "path"}.get(tp.__name__, tp.__name__)
    else:
        name = str(tp)
    return f"{name} or null" if optional else name


def _bounds(field: FieldInfo) -> str:
    found = []
    for m in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if isinstance(m, getattr(annotated_types, attr.capitalize() if len(attr) == 2 else attr)) or (
                    hasattr(m, attr) and getattr(m, attr) is not None and not isinstance(m, type)):
                value = getattr(m, attr, None)
                if value is not None and f"{sign} {value:g}" not in found and isinstance(value, (int, float)):
                    found.append(f"{sign} {value:g}")
    return f" ({', '.join(found)})" if found else ""


def _shown_default(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, enum.Enum):
        value = value.value
    import json

    return f"`{json.dumps(value, ensure_ascii=False, default=str)}`"


def keys(model: type[BaseModel], prefix: KeyPath = (), sample: bool = False) -> Iterator[Key]:
    """Every key below ``model``, depth first in the model's order."""
    for name, field in model.model_fields.items():
        if field.exclude:  # derived, not a key of the file (Discord's groups)
            continue
        path = (*prefix, field.alias or name)
        inner, _ = _strip(field.annotation)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        env = str(extra["env"]) if "env" in extra else None
        sub = _model(field.annotation)
        default = "" if sub is not None else _shown_default(field.get_default(call_default_factory=True))
        yield Key(path, type_name(field.annotation) + _bounds(field), default, env, sub is not None, sample)
        if sub is not None:  # a section, or an optional one (null by default: its keys are samples)
            yield from keys(sub, path, sample or field.get_default(call_default_factory=True) is None)
            continue
        origin, args = typing.get_origin(inner), _args(inner)
        if origin in (tuple, list) and args and (item := _model(args[0])) is not None:
            yield from keys(item, (*path, "[]"), True)
        elif origin is dict and len(args) == 2 and (item := _model(args[1])) is not None:
            yield from keys(item, (*path, "<name>"), True)
    if model.model_config.get("extra") == "allow":
        annotation = typing.get_type_hints(model).get("__pydantic_extra__")
        if annotation is not None and len(_args(annotation)) == 2 and (item := _model(_args(annotation)[1])):
            yield from keys(item, (*prefix, "<name>"), True)


# ------------------------------------------------------------------------- the example


def _note(notes: dict[KeyPath, Note], path: KeyPath, known: set[KeyPath]) -> Note | None:
    """The example's note of ``path``; a ``<name>`` part matches any entry of that map (a sample
    entry's name, never a key of the model's own: ``models.switch`` is not a model's name)."""
    if path in notes:
        return notes[path]
    if "<name>" not in path:
        return None
    for found, note in notes.items():
        if len(found) == len(path) and all(p == "<name>" or p == f for p, f in zip(path, found)) and not any(
                path[i] == "<name>" and found[: i + 1] in known for i in range(len(path))):
            return note
    return None


@functools.cache
def source_comments(model: type[BaseModel]) -> dict[str, str]:
    """A model's own comments by field: the one ending the field's line, else those just above it.
    Where the example has no note for a key (a sample entry's keys), the reference shows these."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls.__module__.startswith("pydantic"):
            continue
        try:
            lines = inspect.getsource(cls).splitlines()
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("#"):
                above.append(stripped.lstrip("#").strip())
                continue
            m = re.match(r"\s+([A-Za-z_][A-Za-z0-9_]*)\s*:", line)
            if m and m.group(1) in model.model_fields:
                _, comment = _split_comment(line)
                text = comment or " ".join(above)
                if text:
                    found[m.group(1)] = text
            above = []
    return found


def _split_comment(line: str) -> tuple[str, str | None]:
    from bot.setup.notes import _split

    return _split(line)


def description(model: type[BaseModel], key: Key, notes: dict[KeyPath, Note], known: set[KeyPath]) -> str:
    """The example's note of the key; else, for a platform's key, the same key's note under
    another platform; else the model's own comment."""
    note = _note(notes, key.path, known)
    if note and note.text:
        return " ".join(note.text)
    if key.path[0] == "channels" and len(key.path) > 2:
        for other in ("telegram", "discord", "slack"):
            note = _note(notes, ("channels", other, *key.path[2:]), known)
            if note and note.text:
                return " ".join(note.text)
    return _owner_comment(model, key.path)


def _owner_comment(model: type[BaseModel], path: KeyPath) -> str:
    """The source comment of the field at ``path``, found by walking the models."""
    current: Any = model
    for i, part in enumerate(path):
        if part in ("[]", "<name>"):
            continue
        fields = {f.alias or n: (n, f) for n, f in current.model_fields.items()}
        if part not in fields:
            return ""
        name, field = fields[part]
        if i == len(path) - 1:
            return source_comments(current).get(name, "")
        inner, _ = _strip(field.annotation)
        nxt = _model(inner)
        if nxt is None:
            origin, args = typing.get_origin(inner), _args(inner)
            if origin in (tuple, list) and args:
                nxt = _model(args[0])
            elif origin is dict and len(args) == 2:
                nxt = _model(args[1])
        if nxt is None:
            return ""
        current = nxt
    return ""


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def problems(model: type[BaseModel], notes: dict[KeyPath, Note]) -> list[str]:
    """Where ``config.example.yaml`` and the models disagree, one line each."""
    found = []
    defaults = _defaults(model)
    known = {k.path for k in keys(model)}
    for key in keys(model):
        note = _note(notes, key.path, known)
        dotted = ".".join(key.path)
        if note is None:
            if not key.sample:
                found.append(f"{dotted}: not in config.example.yaml")
            continue
        if not note.live or key.section or key.env or key.sample or key.path not in defaults:
            continue
        default = defaults[key.path]
        if note.shown != default and not (isinstance(default, float) and note.shown == default):
            found.append(f"{dotted}: config.example.yaml shows {note.shown!r}, the default is {default!r}")
    return found


def _defaults(model: type[BaseModel]) -> dict[KeyPath, Any]:
    """Each key's default as YAML would show it, from an instance of the models' defaults."""
    out: dict[KeyPath, Any] = {}

    def walk(value: BaseModel, prefix: KeyPath) -> None:
        for name, field in type(value).model_fields.items():
            inner = getattr(value, name)
            path = (*prefix, field.alias or name)
            if isinstance(inner, BaseModel):
                walk(inner, path)
            else:
                out[path] = _plain(inner)

    walk(model(), ())
    return out


# ----------------------------------------------------------------------------- the page

INTRO = """\
# Configuration reference

Every key of `config.yaml`, generated from the config models (types and defaults) and the
comments of `config.example.yaml` in the repository (descriptions) by `python -m bot.setup.reference`;
a test checks that this page is current and that the example shows every key with its default.
`chatgate init` writes a small `config.yaml`; add any key below to it. `chatgate check -c config.yaml`
validates the file and names a wrong key.

`${VAR}` and `${VAR:-default}` in a string value are read from the environment, and from the
`.env` file beside `config.yaml` (a variable set in the environment wins). A secret left out
of the file is read from the variable shown. In a key, `<name>` stands for a name you choose
(an entry of a map) and `[]` for each entry of a list.
"""


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render(model: type[BaseModel], notes: dict[KeyPath, Note]) -> str:
    out = [INTRO]
    current = None
    known = {k.path for k in keys(model)}
    for key in keys(model):
        top = key.path[0]
        heading = key.path[:2] if top == "channels" and len(key.path) > 1 else key.path[:1]
        if heading != current:
            current = heading
            title = ".".join(heading)
            out.append(f"\n## `{title}`\n")
            note = _note(notes, heading, known)
            if note and note.text:
                out.append(_escape(" ".join(note.text)) + "\n")
            out.append("| Key | Type | Default | Description |\n|---|---|---|---|")
            if key.path == heading:
                continue
        if key.path == heading:
            continue
        text = description(model, key, notes, known)
        if key.env:
            text = f"{text} Read from `{key.env}` when left out.".strip()
        name = ".".join(key.path).replace(".[]", "[]").replace("<name>", "&lt;name&gt;")
        out.append(f"| `{name}` | {key.type} | {key.default} | {_escape(text)} |")
    return "\n".join(out) + "\n"


def generate() -> tuple[str, list[str]]:
    from bot.settings import Config

    notes = read(EXAMPLE.read_text(encoding="utf-8"))
    return render(Config, notes), problems(Config, notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.setup.reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the committed page is current")
    args = parser.parse_args(argv)
    page, found = generate()
    for line in found:
        print(f"config.example.yaml: {line}", file=sys.stderr)
    if args.check:
        current = OUTPUT.is_file() and OUTPUT.read_text(encoding="utf-8") == page
        if not current:
            print(f"{OUTPUT.relative_to(ROOT)} is not current: run python -m bot.setup.reference", file=sys.stderr)
        return 0 if current and not found else 1
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(page, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
