"""Built-in channels by name, each an import path to its ``ChannelSpec``.

A platform is one package under ``adapters/`` plus one line here. Specs are imported
lazily (``spec(name)``): a spec module imports only pydantic and ``bot.channels``; its
``build`` imports the platform SDK, so an SDK loads only when its channel is enabled.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from bot.channels.spec import ChannelSpec

BUILTIN: dict[str, str] = {
    "console": "adapters.console:SPEC",
    "telegram": "adapters.telegram:SPEC",
    "discord": "adapters.discord:SPEC",
    "slack": "adapters.slack:SPEC",
    "whatsapp": "adapters.whatsapp:SPEC",
}


def names() -> tuple[str, ...]:
    return tuple(BUILTIN)


@cache
def spec(name: str) -> ChannelSpec[Any]:
    module, _, attr = BUILTIN[name].partition(":")
    found = getattr(importlib.import_module(module), attr)
    if not isinstance(found, ChannelSpec) or found.name != name:
        raise TypeError(f"{BUILTIN[name]} is not the ChannelSpec of {name!r}")
    return found


def specs() -> tuple[ChannelSpec[Any], ...]:
    return tuple(spec(name) for name in BUILTIN)
