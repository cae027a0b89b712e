"""Slack's slash commands: which names chatgate registers, and what each one means.

Slack keeps some slash commands for itself (``/status``, ``/remind`` …): it never sends
them to an app, and refuses a manifest that lists one (the whole ``slash_commands`` list).
So one app command, ``/chatgate <command> [args]`` (``channels.slack.command``), carries
every command, and each command whose name Slack leaves free is a slash command of its own
as well (``/stop``, ``/new`` …). Everything is derived from the core's command names, so a
new command needs no change here.

Pure data and functions, imported by the config check: ``bot.channels`` only.
"""

from __future__ import annotations

import re

from bot.channels import COMMAND_MENU, COMMAND_NAMES

APP_COMMAND = "chatgate"
NAME = re.compile(r"[a-z0-9_-]{1,31}")  # Slack: no spaces, 32 characters with the slash

# Names Slack keeps for itself. Slack's own list (slack.com/help/articles/201259356, "Use
# built-in slash commands"), with the aliases it accepts (/dm, /close, /part, /s, /keys …),
# plus names apps were refused in practice: /status ("the slash command has an invalid
# name" for a whole manifest: NousResearch/hermes-agent#17054, openclaw/openclaw#29032) and
# /help, /commands, /send, /kill, /debug (openclaw/openclaw#29032; /help was Slack's own
# before it was retired: pyslackers/sirbot-pyslackers#208). Kept here and nowhere else.
RESERVED = frozenset({
    "active", "apps", "archive", "away", "close", "collapse", "commands", "debug", "dm", "dnd", "expand",
    "feed", "feedback", "help", "invite", "invite_people", "join", "keys", "kick", "kill", "leave", "me",
    "msg", "mute", "open", "part", "prefs", "pro", "remind", "remove", "rename", "s", "search", "send",
    "shortcuts", "shrug", "star", "status", "topic", "who",
})


def bare(name: str) -> str:
    """``/ChatGate`` or `` chatgate `` -> ``chatgate``: a leading slash is optional in the
    config, and Slack's command names are lowercase."""
    return name.strip().removeprefix("/").strip().lower()


def direct(prefix: str = "") -> tuple[str, ...]:
    """The commands that are slash commands of their own, without the slash: ``<prefix><name>``
    for every command whose name Slack leaves to apps (with a prefix, usually all of them)."""
    return tuple(f"{prefix}{name}" for name in COMMAND_NAMES if f"{prefix}{name}" not in RESERVED)


def manifest(command: str = APP_COMMAND, prefix: str = "") -> tuple[tuple[str, str, str], ...]:
    """The app manifest's ``slash_commands`` as (command, description, usage hint): the app
    command first, then each command of the menu that is also a slash command of its own."""
    names = [name for name, _ in COMMAND_MENU]
    free = set(direct(prefix))
    return ((f"/{command}", f"Any command: {', '.join(names)}", "<command> [args]"),
            *((f"/{prefix}{name}", text, "") for name, text in COMMAND_MENU
              if f"{prefix}{name}" in free and f"{prefix}{name}" != command))


def spelled(name: str, *, command: str = APP_COMMAND, prefix: str = "") -> str:
    """How a person types chatgate's command ``name`` on Slack: ``/stop`` (or ``/<prefix>stop``)
    where it is a slash command of its own, else ``/chatgate status``."""
    return f"/{prefix}{name}" if f"{prefix}{name}" in direct(prefix) else f"/{command} {name}"


def route(slash: str, text: str, *, command: str = APP_COMMAND, prefix: str = "") -> tuple[str, str]:
    """A slash command as Slack sent it -> (chatgate's command, its args).

    ``/chatgate stop now`` and ``/stop now`` (or ``/<prefix>stop now``) -> ``("stop", "now")``;
    the app command alone, or with a word that is no command, -> ``("help", "")``."""
    name = slash.strip().removeprefix("/").lower()
    if name != command:
        return name.removeprefix(prefix), text.strip()
    parts = text.split(maxsplit=1)
    word = parts[0].removeprefix("/").lower() if parts else ""
    if word not in COMMAND_NAMES:
        return "help", ""
    return word, parts[1].strip() if len(parts) > 1 else ""


def problems(command: str, prefix: str) -> list[str]:
    """``chatgate check`` lines for the app command's name."""
    if not NAME.fullmatch(command):
        return [f'channels.slack.command: "/{command}" is not a Slack command name (letters, digits, "-" and "_", '
                "at most 31)"]
    if command in RESERVED:
        return [f"channels.slack.command: Slack keeps /{command} for itself; pick another name"]
    if command in (f"{prefix}{name}" for name in COMMAND_NAMES):
        return [f"channels.slack.command: /{command} is already one of chatgate's own commands; pick another name"]
    return []
