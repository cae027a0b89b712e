"""MCP tool schemas made acceptable to both OpenAI and Anthropic, pure.

An MCP server describes a tool's arguments with any JSON Schema; the providers each refuse
some: both want an ``object`` at the top without ``anyOf``/``oneOf``/``allOf`` there,
Anthropic wants property names of ``[A-Za-z0-9_.-]{1,64}``, OpenAI refuses an ``array``
without ``items``, and neither resolves a ``$ref`` reliably. ``fit_schema`` returns a schema
both take and the renames it made, so that a call's arguments are given back to the server
under their own names (``restore_arguments``):

- local ``$ref``s (``#/$defs/X``, ``#/definitions/X``) are inlined, a recursive one becomes
  "any value"; ``$defs``, ``$schema``, ``$id`` and ``$comment`` are dropped. What inlining
  builds is counted (each object and list, with its entries) and capped at ``MAX_SIZE``:
  references that multiply out (a few definitions each naming the next several times) would
  build millions of objects, megabytes the providers refuse, so past the cap ``fit_schema``
  raises ``SchemaTooLarge`` and the tool is left out (``bot.mcp.tools`` logs why);
- a top-level combinator's object branches are merged into one object (``allOf``: their
  required keys all; ``anyOf``/``oneOf``: those every branch requires), and the top is an
  ``object`` whatever it said;
- a property name the providers refuse is renamed (characters out of the set become ``_``,
  unique); ``required`` lists only properties that exist;
- an ``array`` without ``items`` gets ``items: {}``; a ``true`` schema becomes ``{}``, a
  property whose schema is ``false`` is dropped;
- descriptions are capped (the tool's at ``MAX_DESCRIPTION``, a property's at ``MAX_PROPERTY_DESCRIPTION``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_DESCRIPTION = 1024
MAX_PROPERTY_DESCRIPTION = 512
MAX_DEPTH = 12  # of inlined references: deeper ones become "any value"
MAX_SIZE = 20_000  # objects, lists and their entries a fitted schema may hold (thousands of tokens already)
_PROPERTY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_DROPPED = ("$schema", "$id", "$defs", "definitions", "$comment", "$anchor", "$dynamicAnchor")
_COMBINATORS = ("allOf", "anyOf", "oneOf")


class SchemaTooLarge(ValueError):
    """A schema that, its references inlined, would hold more than ``MAX_SIZE`` entries."""


@dataclass(frozen=True, slots=True)
class FittedSchema:
    parameters: dict[str, Any]
    renames: dict[str, str] = field(default_factory=dict)  # the name the model uses -> the server's


def cap(text: str, limit: int) -> str:
    text = " ".join(text.split()) if len(text) > limit else text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def describe(description: str | None, server: str, tool: str) -> str:
    """The tool's description as the model reads it, capped; a blank one says where it is from."""
    text = (description or "").strip()
    return cap(text, MAX_DESCRIPTION) if text else f"The {tool} tool of the MCP server {server}."


def fit_schema(schema: Any) -> FittedSchema:
    """A copy of ``schema`` both providers accept, and the property renames made at the top;
    ``SchemaTooLarge`` when inlining its references would pass ``MAX_SIZE``."""
    root = schema if isinstance(schema, Mapping) else {}
    resolved = _resolve(root, root, (), 0, [MAX_SIZE])
    top = _merge_top(resolved if isinstance(resolved, dict) else {})
    found = top.get("properties")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    renames: dict[str, str] = {}
    fitted_properties: dict[str, Any] = {}
    for name, sub in properties.items():
        if sub is False:
            continue
        new = name if _PROPERTY.fullmatch(name) else _unique(_property_name(name), fitted_properties)
        if new != name:
            renames[new] = name
        fitted_properties[new] = _clean(sub)
    back = {old: new for new, old in renames.items()}
    required = [back.get(r, r) for r in top.get("required", []) if isinstance(r, str)]
    out: dict[str, Any] = {k: _clean_value(k, v) for k, v in top.items()
                           if k not in ("properties", "required", "type", *_COMBINATORS, "not", "if", "then", "else",
                                        "enum", "const", "title", "description")}
    out["type"] = "object"
    out["properties"] = fitted_properties
    if required := [r for r in dict.fromkeys(required) if r in fitted_properties]:
        out["required"] = required
    if isinstance(top.get("description"), str):
        out["description"] = cap(top["description"], MAX_PROPERTY_DESCRIPTION)
    return FittedSchema(out, renames)


def restore_arguments(arguments: Mapping[str, Any], renames: Mapping[str, str]) -> dict[str, Any]:
    """The model's arguments under the server's own property names."""
    return {renames.get(key, key): value for key, value in arguments.items()}


def _property_name(name: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_")[:64]


def _unique(name: str, taken: Mapping[str, Any]) -> str:
    serial = 1
    candidate = name
    while candidate in taken:
        serial += 1
        candidate = f"{name[:60]}_{serial}"
    return candidate


def _lookup(root: Mapping[str, Any], ref: str) -> Any:
    """The local target of ``ref`` (``#/...`` JSON pointer), or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _resolve(node: Any, root: Mapping[str, Any], seen: tuple[str, ...], depth: int, left: list[int]) -> Any:
    """``node`` with every local ``$ref`` inlined; a cycle or a missing target is "any value".
    ``left[0]`` is what may still be built: each object and list costs one and one per entry."""
    if isinstance(node, (list, Mapping)):
        left[0] -= 1 + len(node)
        if left[0] < 0:
            raise SchemaTooLarge(f"its references inlined, it would hold more than {MAX_SIZE:,} objects and entries")
    if isinstance(node, list):
        return [_resolve(item, root, seen, depth, left) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _lookup(root, ref)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        if target is None or ref in seen or depth >= MAX_DEPTH or not isinstance(target, Mapping):
            return _resolve(rest, root, seen, depth, left)
        inlined = _resolve(target, root, (*seen, ref), depth + 1, left)
        return {**inlined, **_resolve(rest, root, seen, depth, left)} if isinstance(inlined, dict) else inlined
    return {k: _resolve(v, root, seen, depth, left) for k, v in node.items() if k not in _DROPPED}


def _merge_top(schema: dict[str, Any]) -> dict[str, Any]:
    """The top level as one object: the object branches of its combinators merged in."""
    merged = dict(schema)
    properties = dict(merged.get("properties") or {}) if isinstance(merged.get("properties"), dict) else {}
    required = list(merged.get("required") or []) if isinstance(merged.get("required"), list) else []
    for kind in _COMBINATORS:
        branches = [b for b in merged.pop(kind, None) or [] if isinstance(b, dict)]
        if not branches:
            continue
        flat = [_merge_top(b) for b in branches]
        for branch in flat:
            for name, sub in (branch.get("properties") or {}).items():
                properties.setdefault(name, sub)
        sets = [set(b.get("required") or []) for b in flat]
        if kind == "allOf":
            required += [r for s in sets for r in sorted(s)]
        elif sets:
            required += sorted(set.intersection(*sets))
    merged["properties"] = properties
    merged["required"] = required
    return merged


_SCHEMA = ("items", "contains", "not", "if", "then", "else", "propertyNames", "additionalItems", "unevaluatedItems")
_SCHEMA_OR_BOOL = ("additionalProperties", "unevaluatedProperties")
_SCHEMA_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAP = ("properties", "patternProperties", "dependentSchemas")


def _clean(node: Any) -> Any:
    """A sub-schema as both providers take it (see the module doc)."""
    if node is True or node is None:
        return {}
    if node is False:
        return {"not": {}}
    if not isinstance(node, dict):
        return node
    out = {key: _clean_value(key, value) for key, value in node.items()}
    kind = out.get("type")
    if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in out:
        out["items"] = {}
    return out


def _clean_value(key: str, value: Any) -> Any:
    """One keyword's value: a schema, schemas, or a plain value left as it is."""
    if key in _SCHEMA or (key in _SCHEMA_OR_BOOL and not isinstance(value, bool)):
        return _clean(value)
    if key in _SCHEMA_LIST and isinstance(value, list):
        return [_clean(item) for item in value]
    if key in _SCHEMA_MAP and isinstance(value, dict):
        return {name: _clean(sub) for name, sub in value.items() if sub is not False}
    if key == "description" and isinstance(value, str):
        return cap(value, MAX_PROPERTY_DESCRIPTION)
    return value
