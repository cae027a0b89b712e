"""JSON schemas from typed signatures, and the light check of arguments against them.

Both halves are pure. ``schema_from_function`` runs once per tool at decoration time;
``check_arguments`` runs per call and only knows what the builder emits: an object of
named properties with basic types, arrays, enums (``Literal``) and ``anyOf`` (unions).

Supported parameter types: ``str``, ``int``, ``float``, ``bool``, ``list[X]``,
``dict``, ``Literal[...]``, unions, ``X | None``. A parameter with a default is not
required; ``null`` sent for an optional argument means "use the default", so optional
parameters keep the plain schema of ``X`` (no ``null`` in it, which some providers reject).
Per-parameter descriptions come from ``Annotated[X, "description"]`` or from the
Google-style ``Args:`` section of the docstring.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

_ARGS_HEADER = re.compile(r"^(\s*)(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_DEFAULT = (str, int, float, bool)


def schema_from_function(function: Callable[..., Any], *, context_type: type) -> tuple[str, dict[str, Any]]:
    """``(description, parameters schema)`` of a tool function whose first parameter is the context."""
    qualname = getattr(function, "__qualname__", repr(function))
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"tool {qualname} must be an async function")
    doc = inspect.getdoc(function)
    if not doc:
        raise TypeError(f"tool {qualname} needs a docstring: its first paragraph is what the model reads")
    hints = typing.get_type_hints(function, include_extras=True)
    params = list(inspect.signature(function).parameters.values())
    if not params or hints.get(params[0].name) is not context_type:
        raise TypeError(f"tool {qualname}: the first parameter must be `ctx: {context_type.__name__}`")
    arg_docs = _args_section(doc)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in params[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"tool {qualname}: parameter {param.name} must be a plain named parameter")
        if param.name not in hints:
            raise TypeError(f"tool {qualname}: parameter {param.name} needs a type annotation")
        hint, description = _unwrap_annotated(hints[param.name])
        try:
            prop = _type_schema(hint)
        except TypeError as exc:
            raise TypeError(f"tool {qualname}: parameter {param.name}: {exc}") from None
        description = description or arg_docs.get(param.name)
        if description:
            prop["description"] = description
        if param.default is param.empty:
            required.append(param.name)
        elif isinstance(param.default, _JSON_DEFAULT) or (
            isinstance(param.default, (list, tuple)) and all(isinstance(v, _JSON_DEFAULT) for v in param.default)
        ):
            prop["default"] = list(param.default) if isinstance(param.default, tuple) else param.default
        properties[param.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required,
                              "additionalProperties": False}
    return _first_paragraph(doc), schema


def _unwrap_annotated(hint: Any) -> tuple[Any, str | None]:
    if get_origin(hint) is Annotated:
        base, *meta = get_args(hint)
        return base, next((m for m in meta if isinstance(m, str)), None)
    return hint, None


def _type_schema(hint: Any) -> dict[str, Any]:
    hint, _ = _unwrap_annotated(hint)
    if hint in _PRIMITIVES:
        return {"type": _PRIMITIVES[hint]}
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        kinds = {_PRIMITIVES.get(type(v)) for v in args}
        if None in kinds:
            raise TypeError(f"Literal values must be str, int, float or bool, not {args!r}")
        return ({"type": kinds.pop()} if len(kinds) == 1 else {}) | {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _type_schema(options[0])  # X | None: optional, see the module docstring
        return {"anyOf": [_type_schema(a) for a in options]}
    if hint in (list, tuple) or origin in (list, tuple, Sequence):
        items = [a for a in args if a is not Ellipsis]
        return {"type": "array", "items": _type_schema(items[0])} if items else {"type": "array"}
    if hint is dict or origin in (dict, Mapping):
        return {"type": "object"}
    raise TypeError(f"unsupported type {hint!r}")


def _first_paragraph(doc: str) -> str:
    lines: list[str] = []
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            break
        if not line.strip():
            if lines:
                break
            continue
        lines.append(line.strip())
    return " ".join(lines)


def _args_section(doc: str) -> dict[str, str]:
    """``{name: description}`` from a Google-style ``Args:`` section."""
    found: dict[str, str] = {}
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if _ARGS_HEADER.match(line)), None)
    if start is None:
        return found
    header_indent = len(lines[start]) - len(lines[start].lstrip())
    entry_indent: int | None = None
    current: str | None = None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= header_indent:
            break  # the next section (Returns:, Raises:, ...)
        entry_indent = indent if entry_indent is None else entry_indent
        match = _ARG_LINE.match(line.strip())
        if indent == entry_indent and match:
            current = match.group(1)
            found[current] = match.group(2).strip()
        elif current is not None:
            found[current] = f"{found[current]} {line.strip()}".strip()
    return found


# -- checking arguments (per call) ------------------------------------------------------

_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_ARTICLE = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
            "array": "a list", "object": "an object", "null": "null"}


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(arguments to pass, problems)``: nulls for optional keys dropped; problems are
    sentences for the model (missing required, unknown key, wrong type, not in enum)."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    closed = schema.get("additionalProperties", True) is False
    cleaned: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in arguments.items():
        if key not in properties:
            if closed:
                problems.append(f"unknown argument {key!r}")
            else:
                cleaned[key] = value
        elif value is None and key not in required:
            continue  # null for an optional argument: use the default
        else:
            problems.extend(_check_value(properties[key], value, key))
            cleaned[key] = value
    problems.extend(f"missing required argument {key!r}" for key in schema.get("required", ()) if key not in arguments)
    return cleaned, problems


def _check_value(schema: Mapping[str, Any], value: Any, where: str) -> list[str]:
    if "anyOf" in schema:
        if any(not _check_value(option, value, where) for option in schema["anyOf"]):
            return []
        options = " or ".join(_ARTICLE.get(o.get("type", ""), "another value") for o in schema["anyOf"])
        return [f"{where!r} must be {options}, got {_json_kind(value)}"]
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else list(kind or [])
    if kinds and not any(_TYPE_CHECKS[k](value) for k in kinds if k in _TYPE_CHECKS):
        return [f"{where!r} must be {' or '.join(_ARTICLE.get(k, k) for k in kinds)}, got {_json_kind(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where!r} must be one of {', '.join(map(repr, schema['enum']))}, got {value!r}"]
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            if problems := _check_value(schema["items"], item, f"{where}[{i}]"):
                return problems
    return []


def _json_kind(value: Any) -> str:
    for kind, check in _TYPE_CHECKS.items():
        if check(value):
            return _ARTICLE[kind]
    return type(value).__name__


def describe_parameters(schema: Mapping[str, Any]) -> str:
    """One line the model can act on: ``path (string, required), offset (integer)``."""
    required = set(schema.get("required", ()))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or ("one of " + "/".join(map(str, prop["enum"])) if "enum" in prop else "any")
        parts.append(f"{name} ({kind}{', required' if name in required else ''})")
    return ", ".join(parts) or "no arguments"
