"""Where a key is in the config's models: the model at a location, whether it holds a secret,
every secret's location and variable, a location as dotted text. For the loader and the wording
of errors; pure."""

from __future__ import annotations

from functools import cache
from typing import Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel

from bot.config.types import Loc


def model_at(loc: Loc, model: type[BaseModel]) -> type[BaseModel] | None:
    """The model class below ``model`` that validates the mapping at ``loc`` (a dict key counts
    as a step)."""
    i = 0
    while i < len(loc):
        step = loc[i]
        if not isinstance(step, str):
            return None
        field = model.model_fields.get(step)
        if field is None:
            found, i = _extra_model(model), i + 1
        elif get_origin(field.annotation) is dict and i + 1 < len(loc):
            found, i = _as_model(get_args(field.annotation)[1]), i + 2
        else:
            found, i = _as_model(field.annotation), i + 1
        if found is None:
            return None
        model = found
    return model


def _as_model(hint: Any) -> type[BaseModel] | None:
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


@cache
def _extra_model(model: type[BaseModel]) -> type[BaseModel] | None:
    """The model of a section's typed extra keys (``models.<name>``), if it has them."""
    hint = get_type_hints(model).get("__pydantic_extra__")
    return _as_model(get_args(hint)[1]) if get_origin(hint) is dict else None


@cache
def secrets(model: type[BaseModel]) -> dict[tuple[str, ...], str]:
    """Every secret field below ``model``: its location (field names) -> its environment variable."""
    found: dict[tuple[str, ...], str] = {}
    for name, field in model.model_fields.items():
        if (section := _as_model(field.annotation)) is not None:
            found.update({(name, *loc): var for loc, var in secrets(section).items()})
        elif isinstance(field.json_schema_extra, dict) and "env" in field.json_schema_extra:
            found[(name,)] = str(field.json_schema_extra["env"])
    return found


def holds_secret(loc: Loc, model: type[BaseModel]) -> bool:
    """True for a secret and for every section around one: their values are never echoed."""
    return any(secret[: len(loc)] == loc for secret in secrets(model))


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{part}" if out else str(part)
    return out
