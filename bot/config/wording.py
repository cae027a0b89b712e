"""Error wording: one pydantic error -> one ``ConfigError`` line naming the dotted key and the fix."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from bot.config.keys import dotted, holds_secret, model_at
from bot.config.types import Loc
from bot.errors import ConfigError


def describe_value(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    text = str(value)  # JSON quoting keeps a newline in the value from breaking the one line
    return json.dumps(text if len(text) <= 40 else text[:37] + "...", ensure_ascii=False)


_PHRASES = {
    "int_type": "expected an integer", "int_parsing": "expected an integer",
    "int_from_float": "expected an integer", "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false", "bool_parsing": "expected true or false",
    "string_type": "expected a string", "model_type": "expected a mapping (indented key: value lines)",
    "dict_type": "expected a mapping (indented key: value lines)", "list_type": "expected a list",
    "tuple_type": "expected a list", "path_type": "expected a path", "url": "expected an http:// or https:// URL",
}


def _phrase(err: Mapping[str, Any], secret: bool, root: type[BaseModel]) -> tuple[str, str | None]:
    """(problem, fix) for one pydantic error in a ``root`` model; never pydantic's own wording
    when we know better."""
    kind, ctx, loc = err["type"], err.get("ctx") or {}, err["loc"]
    got = "" if secret else f", got {describe_value(err['input'])}"
    if kind == "extra_forbidden":
        model = model_at(loc[:-1], root)
        allowed = list(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        if close:
            return f'unknown key (did you mean "{close[0]}"?)', None
        return "unknown key", (f"allowed: {', '.join(allowed)}" if allowed else "remove it")
    if kind == "invalid_key" or (loc[-1:] == ("[key]",) and kind == "string_type"):
        return f"keys must be text, got {describe_value(err['input'])}", "quote it"
    if kind == "missing":
        return "missing", "add this key"
    if kind == "literal_error":
        choices = ", ".join(re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        return f"must be one of {choices}{got}", None
    bounds = {"greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt"),
              "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}
    if kind in bounds:
        word, key = bounds[kind]
        return f"must be {word} {ctx.get(key)}{got}", None
    if kind == "string_too_short":
        return "must not be empty", None
    if kind == "string_pattern_mismatch":
        if loc[:2] == ("agent", "identity_links"):
            return f'expected "platform:user_id" such as "telegram:123"{got}', None
        return f"may contain only letters, digits, '.', '_' and '-'{got}", None
    if kind in ("user_id", "webhook_secret", "password_hash"):
        return str(err["msg"]), None  # the message names the value itself (never a secret's)
    if kind in _PHRASES:
        return _PHRASES[kind] + got, None
    text = str(ctx["error"]) if kind == "value_error" and "error" in ctx else str(err["msg"])  # no "Value error, "
    return text.splitlines()[0] + got, None


def from_validation(exc: ValidationError, env_sources: Mapping[Loc, tuple[str, ...]],
                    root: type[BaseModel]) -> ConfigError:
    """The first error of validating a ``root`` model, as one line naming the key and the fix."""
    err = exc.errors(include_url=False)[0]
    loc: Loc = tuple(err["loc"])
    if loc[-1:] == ("[key]",):  # the key itself is wrong: name it as a key, not an index
        loc = (*loc[:-2], str(loc[-2]))
    elif err["type"] == "invalid_key":
        loc = (*loc[:-1], str(loc[-1]))
    problem, fix = _phrase(err, secret=holds_secret(loc, root), root=root)
    names = env_sources.get(loc)
    if names and fix is None:
        fix = f"check {' and '.join(names)}"
    return ConfigError(dotted(loc), problem, fix)
