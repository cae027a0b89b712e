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
    import asyncio
    from dataclasses import replace

    from bot.hooks.pre_tool import PreToolHooks
    from bot.tools.sandbox import require_sandbox

    # run like exec (its sandbox and bounds), never with its network, in an empty read-only folder
    sandbox = replace(core.sandbox, network=False, writable=False)
    if not core.config.tools.exec.enabled:  # with exec on, `chatgate run` checked the sandbox already
        await asyncio.to_thread(require_sandbox, sandbox, key="hooks.pre_tool")  # not every call refused later
    hooks = PreToolHooks(core.config.section("hooks", HooksConfig).pre_tool, sandbox)
    core.gate.add(hooks)
    yield hooks


SPEC = CapabilitySpec("hooks", _open, config=HooksConfig,
                      enabled=lambda config: bool(config.section("hooks", HooksConfig).pre_tool))

__all__: Sequence[str] = ("SPEC",)
