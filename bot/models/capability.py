"""The models capability: ``/model`` (show or pick a conversation's model), its picker's
presses, and its lines of ``/status``. The models themselves (the router, fallbacks, titles)
are the core's: every run needs one."""

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
    from bot.models.command import ModelCommand

    yield ModelCommand(core.models, core.channels, core.store)


SPEC = CapabilitySpec("models", open_models, commands=(
    CommandSpec("model", _model, "this chat's model; <name> picks one, default goes back",
                "Show or change this chat's model", capability="models"),
))
