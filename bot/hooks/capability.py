"""The hooks capability's spec: on when ``hooks.pre_tool`` lists a hook; it adds its step to the
core's tool gate, which every tool call passes (a run's, a sub-agent's, the memory flush's, a
task's check's)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.hooks.config import HooksConfig

if TYPE_CHECKING:
    from bot.hooks.pre_tool import PreToolHooks


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[PreToolHooks]:
    from dataclasses import replace

    from bot.hooks.pre_tool import PreToolHooks

    # run like exec (its sandbox and bounds), never with its network, in an empty read-only folder
    hooks = PreToolHooks(core.config.section("hooks", HooksConfig).pre_tool,
                         replace(core.sandbox, network=False, writable=False))
    core.gate.add(hooks)
    yield hooks


SPEC = CapabilitySpec("hooks", _open, config=HooksConfig,
                      enabled=lambda config: bool(config.section("hooks", HooksConfig).pre_tool))

__all__: Sequence[str] = ("SPEC",)
