"""Built-in capabilities by name, each an import path to its ``CapabilitySpec``.

A capability is one package under ``bot/`` plus one line here. A spec module imports only
what declaring it needs (``bot.commands``, ``bot.capabilities.spec``); its ``open`` imports
the rest, so a capability that is switched off loads nothing.
"""

from __future__ import annotations

import importlib
from functools import cache

from bot.capabilities.spec import CapabilitySpec

BUILTIN: dict[str, str] = {
    "ops": "bot.ops.capability:SPEC",  # first: it hears the others' signals from their start
    "cluster": "bot.cluster.capability:SPEC",  # joins before the core is built (PostgreSQL)
    "telemetry": "bot.telemetry.capability:SPEC",
    "hooks": "bot.hooks.capability:SPEC",  # its step in the tool gate before the approvals'
    "approvals": "bot.approvals.capability:SPEC",
    "models": "bot.models.capability:SPEC",
    "skills": "bot.skills.capability:SPEC",  # its toolset before the MCP servers'
    "mcp": "bot.mcp.capability:SPEC",
    "schedules": "bot.schedules.capability:SPEC",
    "media": "bot.media.capability:SPEC",
    "api": "bot.api.capability:SPEC",
    "webchat": "bot.api.webchat.capability:SPEC",
    "browser": "bot.browser.capability:SPEC",
    "images": "bot.images.capability:SPEC",
    "doctor": "bot.doctor.capability:SPEC",
    "usage": "bot.usage.capability:SPEC",
    "recall": "bot.recall.capability:SPEC",
    "dashboard": "bot.dashboard.capability:SPEC",  # after those whose panels it shows
    "setup": "bot.setup.capability:SPEC",  # `chatgate init`; never enabled
}


@cache
def spec(name: str) -> CapabilitySpec:
    module, _, attr = BUILTIN[name].partition(":")
    found = getattr(importlib.import_module(module), attr)
    if not isinstance(found, CapabilitySpec) or found.name != name:
        raise TypeError(f"{BUILTIN[name]} is not the CapabilitySpec of {name!r}")
    return found


def specs() -> tuple[CapabilitySpec, ...]:
    return tuple(spec(name) for name in BUILTIN)
