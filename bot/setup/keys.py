"""Every key of the config models as a person needs it (``keys``): its path, type, default,
description and samples; ``bot.setup.reference`` writes the reference page from them and
``bot.setup.example`` writes ``config.example.yaml``.

What a model says about its keys, for people:

- ``Field(description=...)``: what a key does; on a section's field, the section's introduction.
- ``Field(examples=[value])``: a sample, shown commented out: an optional key that is left out
  by default (``storage.url``), or entries of a map or a list (``mcp.servers``, ``tools.approval``).
- A section model's ``model_config["json_schema_extra"]``: ``description``, its introduction where
  the field holding it says none (a capability's or a platform's section); ``descriptions``, keys
  it inherits said in its own words (a platform's ``allow_from``: its user ids; the inherited
  ``examples`` are then not shown); ``entries`` and ``examples``, the named entries of a model
  that takes them (``models``: its ``<name>`` and a sample of them).
- A secret's environment variable (``bot.config.types.secret``): the example shows ``${VAR}``.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bot.config.types import AccessConfig

KeyPath = tuple[str, ...]
REQUIRED: Any = PydanticUndefined  # the default of a key that has none


@dataclass(frozen=True, slots=True)
class Key:
    path: KeyPath  # ("channels", "telegram", "token"); "<name>" for a map's entry, "[]" for a list's
    annotation: Any  # its type, with its constraints (``Annotated``)
    default: Any  # REQUIRED when it has none
    description: str
    examples: tuple[Any, ...]
    env: str | None  # a secret's environment variable
    section: bool  # a section (its keys follow)
    sample: bool  # inside a map's or a list's entry, or an optional section: shown in samples only
    named: bool = False  # the named entries of a model that takes them (``models.<name>``)


def unwrap(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); Annotated dropped."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        rest = [a for a in args if a is not type(None)]
        if len(rest) < len(args):
            inner, _ = unwrap(rest[0] if len(rest) == 1 else typing.Union[tuple(rest)])
            return inner, True
    return tp, False


def model_of(tp: Any) -> type[BaseModel] | None:
    tp, _ = unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def shape(tp: Any) -> Any:
    """What a value of ``tp`` holds, for writing a sample: a model (a mapping of its keys),
    ``("map", shape)``, ``("list", shape)``, or None (plain data)."""
    if (found := model_of(tp)) is not None:
        return found
    tp, _ = unwrap(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (tuple, list) and args:
        return ("list", shape(args[0]))
    if origin is dict and len(args) == 2:
        return ("map", shape(args[1]))
    return None


def extra(model: type[BaseModel]) -> dict[str, Any]:
    """A section's ``json_schema_extra``: its introduction, its inherited keys' descriptions."""
    found = model.model_config.get("json_schema_extra")
    return found if isinstance(found, dict) else {}


def described(model: type[BaseModel], name: str, field: FieldInfo) -> tuple[str, tuple[Any, ...]]:
    """A key's description and examples as ``model`` has them: its own words for an inherited key,
    else the field's (a section's: its model's introduction when the field has none)."""
    own = extra(model).get("descriptions", {})
    if name in own:
        return str(own[name]), ()
    text = field.description or ""
    if not text and (sub := model_of(field.annotation)) is not None:
        text = str(extra(sub).get("description", ""))
    return text, tuple(field.examples or ())


def _ordered(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    """A model's fields in its order; a platform's section: ``enabled``, its own keys, then the
    keys every platform has (``streaming``, ``max_download_mb``), then the access keys."""
    fields = list(model.model_fields.items())
    if not issubclass(model, AccessConfig):
        return fields
    rank = {name: 3 for name in AccessConfig.model_fields} | {"enabled": 0, "streaming": 2, "max_download_mb": 2}
    return sorted(fields, key=lambda item: rank.get(item[0], 1))


def keys(model: type[BaseModel], prefix: KeyPath = (), sample: bool = False) -> Iterator[Key]:
    """Every key below ``model``, depth first in the model's order (``_ordered``)."""
    for name, field in _ordered(model):
        if field.exclude:  # derived, not a key of the file (Discord's groups)
            continue
        path = (*prefix, field.alias or name)
        default = REQUIRED if field.is_required() else field.get_default(call_default_factory=True)
        text, examples = described(model, name, field)
        settings = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        env = str(settings["env"]) if "env" in settings else None
        annotation = typing.Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        sub = model_of(field.annotation)
        yield Key(path, annotation, default, text, examples, env, sub is not None, sample)
        if sub is not None:  # a section, or an optional one (null by default: its keys are samples)
            yield from keys(sub, path, sample or default is None)
            continue
        inner, _ = unwrap(field.annotation)
        found = shape(inner)
        if isinstance(found, tuple) and isinstance(found[1], type):
            yield from keys(found[1], (*path, "[]" if found[0] == "list" else "<name>"), True)
    if model.model_config.get("extra") == "allow":
        annotation = typing.get_type_hints(model).get("__pydantic_extra__")
        item = model_of(typing.get_args(annotation)[1]) if annotation is not None else None
        if item is not None:
            about = extra(model)
            yield Key((*prefix, "<name>"), annotation, {}, str(about.get("entries", "")),
                      tuple(about.get("examples", ())), None, True, True, named=True)
            yield from keys(item, (*prefix, "<name>"), True)


def plain(value: Any) -> Any:
    """A default or a sample as YAML shows it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value
