"""The models capability: ``/model`` (show or pick a conversation's model), its picker's
presses, its lines of ``/status``, and session titles (``models.titles``: ``titles``, after
each run). The models themselves (the router, fallbacks) are the core's: every run needs one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply

if TYPE_CHECKING:
    from bot.models.command import ModelCommand


async def _model(command: ModelCommand, call: CommandCall) -> Reply | None:
    return await command.run(call, call.spell)


@asynccontextmanager
async def open_models(core: Core) -> AsyncIterator[ModelCommand]:
    from bot.agent.events import EventKind, RunEvent
    from bot.models.command import ModelCommand
    from bot.models.titles import Titles
    from bot.tracing import Redactor

    told = lambda c, r: core.events.emit(RunEvent(EventKind.TITLE_CALLS, r.run_id, c, trace=r))  # noqa: E731
    titles = Titles(core.models, core.store, agent_id=core.config.agent.id, told=told,
                    meter=core.limits.charge if core.limits.active else None,
                    redactor=Redactor(core.config.secret_values()))
    core.post_run.append(titles.post_run)
    try:
        yield ModelCommand(core.models, core.channels, core.store)
    finally:
        await titles.aclose()


SPEC = CapabilitySpec("models", open_models, commands=(
    CommandSpec("model", _model, "this chat's model; <name> picks one, default goes back",
                "Show or change this chat's model", capability="models"),
))
