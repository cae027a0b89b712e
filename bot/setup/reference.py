"""The configuration's keys, read from the config models (``bot.settings.Config``: the core's
sections, each platform's and each capability's): the one source of ``config.example.yaml``
(``bot.setup.example``) and of the configuration reference, ``docs/reference/configuration.md``
(``render``: every key with its type, its default and its description), and what ``chatgate
check`` validates against. ``tests/test_reference.py`` checks that both committed files are what
this writes.

What a model says about its keys for people, and where: ``bot.setup.keys``.

    python -m bot.setup.reference          # rewrite config.example.yaml and the reference
    python -m bot.setup.reference --check  # exit 1 when either is not what the models say
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr

from bot.setup.example import example, sample_lines
from bot.setup.keys import REQUIRED, Key, KeyPath, keys, plain, unwrap

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "config.example.yaml"
OUTPUT = ROOT / "docs" / "reference" / "configuration.md"


def type_name(tp: Any) -> str:
    tp, optional = unwrap(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
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


def _bounds(tp: Any) -> str:
    """``(≥ 1, ≤ 200)``: the constraints of ``Annotated[X, Field(ge=1, le=200)]``."""
    found: list[str] = []
    metadata = typing.get_args(tp)[1:] if typing.get_origin(tp) is typing.Annotated else ()
    for m in metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(m, attr, None)
            if isinstance(value, (int, float)) and not isinstance(m, type) and f"{sign} {value:g}" not in found:
                found.append(f"{sign} {value:g}")
    return f" ({', '.join(found)})" if found else ""


def _shown_default(key: Key) -> str:
    if key.default is REQUIRED:
        return "required"
    if key.section and key.default is not None:
        return ""
    return f"`{json.dumps(plain(key.default), ensure_ascii=False, default=str)}`"


INTRO = """\
# Configuration reference

Every key of `config.yaml`, generated from the config models (their types, defaults and
descriptions) by `python -m bot.setup.reference`, which writes `config.example.yaml` in the
repository from the same models; a test checks that both are current. `chatgate init` writes a
small `config.yaml`; add any key below to it. `chatgate check -c config.yaml` validates the file
against the same models and names a wrong key.

`${VAR}` and `${VAR:-default}` in a string value are read from the environment, and from the
`.env` file beside `config.yaml` (a variable set in the environment wins). A secret left out
of the file is read from the variable shown. In a key, `<name>` stands for a name you choose
(an entry of a map) and `[]` for each entry of a list.
"""


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render(model: type[BaseModel]) -> str:
    """The reference page: a table per section, then its keys' samples."""
    out = [INTRO]
    current: KeyPath | None = None
    samples: list[Key] = []

    def flush() -> None:
        for key in samples:
            name = ".".join(key.path).replace(".[]", "[]")
            out.append(f"\n`{name}`, for example:\n\n```yaml")
            out.extend(code for code, _ in sample_lines(key))
            out.append("```")
        samples.clear()

    for key in keys(model):
        heading = key.path[:2] if key.path[0] == "channels" and len(key.path) > 1 else key.path[:1]
        if heading != current:
            flush()
            current = heading
            out.append(f"\n## `{'.'.join(heading)}`\n")
            if key.path == heading and key.description:
                out.append(_escape(key.description) + "\n")
            out.append("| Key | Type | Default | Description |\n|---|---|---|---|")
        if key.examples:
            samples.append(key)
        if key.path == heading:
            continue
        text = key.description + (" (example below)" if key.examples else "")
        if key.env:
            text = f"{text.rstrip('.')}. Read from `{key.env}` when left out." if text else \
                f"Read from `{key.env}` when left out."
        name = ".".join(key.path).replace(".[]", "[]").replace("<name>", "&lt;name&gt;")
        kind = "entries" if key.named else type_name(key.annotation) + _bounds(key.annotation)
        out.append(f"| `{name}` | {kind} | {_shown_default(key)} | {_escape(text)} |")
    flush()
    return "\n".join(out) + "\n"


def generate() -> dict[Path, str]:
    """Each generated file and what it should hold."""
    from bot.settings import Config

    return {EXAMPLE: example(Config), OUTPUT: render(Config)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.setup.reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the committed files are current")
    args = parser.parse_args(argv)
    stale = 0
    for path, text in generate().items():
        current = path.is_file() and path.read_text(encoding="utf-8") == text
        if args.check:
            if not current:
                stale += 1
                print(f"{path.relative_to(ROOT)} is not current: run python -m bot.setup.reference", file=sys.stderr)
        elif not current:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
