"""Application (slash) commands: the core's command menu as Discord global commands.

``/stop``, ``/new``, ``/status``, ``/whoami`` and ``/help`` come from ``COMMAND_MENU``. A
slash command becomes an inbound message with the text ``/stop`` (...), answered like the
text command; the interaction is deferred at once, so Discord's 3-second limit never
matters, and the core's answer then fills the deferred reply (see ``channel``).

Global commands are overwritten (one bulk PUT) only when their definition differs from
what Discord already has: ``in_sync`` compares the tree's payload with the fetched remote
commands on each start (one GET), never on reconnects.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import discord
from discord import app_commands

from bot.channels import COMMAND_MENU

log = logging.getLogger(__name__)

Handler = Callable[[discord.Interaction, str], Awaitable[None]]


def build_tree(client: discord.Client, handle: Handler) -> app_commands.CommandTree[Any]:
    tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
    for name, description in COMMAND_MENU:
        tree.add_command(app_commands.Command(name=name, description=description, callback=_callback(name, handle)))
    return tree


def _callback(name: str, handle: Handler) -> Callable[[discord.Interaction[Any]], Coroutine[Any, Any, None]]:
    async def callback(interaction: discord.Interaction[Any]) -> None:
        await handle(interaction, name)

    callback.__name__ = name
    return callback


def payload(tree: app_commands.CommandTree[Any]) -> list[dict[str, Any]]:
    return [command.to_dict(tree) for command in tree.get_commands()]


def in_sync(local: Sequence[Mapping[str, Any]], remote: Sequence[Mapping[str, Any]]) -> bool:
    """Does Discord already hold exactly these commands? Only the keys we send are compared
    (Discord adds ids and versions; it may leave out keys whose value is the default)."""
    defaults: dict[str, Any] = {"options": [], "nsfw": False, "dm_permission": True,
                                "default_member_permissions": None, "type": 1}
    by_name = {c.get("name"): c for c in remote}
    if set(by_name) != {c["name"] for c in local}:
        return False
    for command in local:
        theirs = by_name[command["name"]]
        for key, value in command.items():
            if theirs.get(key, defaults.get(key)) != value:
                return False
    return True


async def sync(client: discord.Client, tree: app_commands.CommandTree[Any]) -> bool:
    """Overwrite the global commands when they differ; True when they were written."""
    app_id = client.application_id
    if app_id is None:
        return False
    local = payload(tree)
    remote = await client.http.get_global_commands(app_id)
    if in_sync(local, list(remote)):
        return False
    await client.http.bulk_upsert_global_commands(app_id, payload=local)
    log.info("discord: slash commands updated (%s)", ", ".join(f"/{c['name']}" for c in local))
    return True
