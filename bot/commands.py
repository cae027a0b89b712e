"""Chat commands: one table, parsed here, answered by the intake at once, even during a run.

``COMMANDS`` is the one list: the core's entries here (``CORE``), and each capability's, which
its spec declares (``bot.capabilities``). Each entry names its handler, its ``/help`` line,
its menu description (the platforms' command menus: Telegram's list, Discord's and Slack's
slash commands; empty keeps it out of menus), whether it is ``urgent`` (never waits behind
the session's earlier messages) and whether it is for ``owners_only``. ``NAMES``, ``MENU``,
``BY_NAME`` and ``help_text`` are derived from it (made on first use, once the capabilities'
specs can be read), so adding a command is one entry and its handler.

A core handler gets the ``CommandHost`` (what the core can do for a command: the intake
implements it); a capability's gets the running capability (``capability`` names it; when it
is not running, the reply is ``off``). Both get the ``CommandCall`` and return the ``Reply``
owed to the chat, or None when it answered on its own (``/compact`` runs in the session's lane).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, cast

from bot.command_spec import Command, CommandCall, CommandSpec, Handler, Reply
from bot.messages import ChatType

if TYPE_CHECKING:
    from bot.conversation import Conversation

__all__ = ["Command", "CommandCall", "CommandHost", "CommandSpec", "Handler", "Reply", "by_name", "command_names",
           "help_text", "parse_command", "status_text", "stop_text"]


class CommandHost(Protocol):
    async def stop(self, conversation: Conversation) -> tuple[bool, int, tuple[int, ...]]:
        """Stop the session's run and queue: (a run was stopped, messages dropped, ids it answers)."""

    async def stop_chat(self, platform: str, chat_id: str) -> int:
        """Stop every run of a chat; how many."""

    async def fresh(self, conversation: Conversation) -> None:
        """Stop the session and start a fresh one (the old one is kept)."""

    async def status(self, call: CommandCall) -> str:
        """``/status``'s text."""

    async def compact(self, call: CommandCall) -> None:
        """Queue a compaction in the session's lane (it answers when done)."""


def stop_text(stopped: bool, dropped: int) -> str:
    """What ``/stop`` tells the chat (the dashboard's Stop says the same)."""
    text = "Stopped." if stopped else "Nothing is running."
    if dropped:
        text += f" {dropped} waiting message{'s' if dropped != 1 else ''} dropped."
    return text


async def _stop(host: CommandHost, call: CommandCall) -> Reply:
    stopped, dropped, answered = await host.stop(call.conversation)
    return Reply(stop_text(stopped, dropped), answered)


async def _stopall(host: CommandHost, call: CommandCall) -> Reply:
    count = await host.stop_chat(call.msg.platform, call.msg.chat_id)
    return Reply(f"Stopped {count} run{'s' if count != 1 else ''}.")


async def _new(host: CommandHost, call: CommandCall) -> Reply:
    await host.fresh(call.conversation)
    return Reply("Started a fresh conversation. The old one is kept.")


async def _status(host: CommandHost, call: CommandCall) -> Reply:
    return Reply(await host.status(call))


async def _compact(host: CommandHost, call: CommandCall) -> None:
    await host.compact(call)


async def _whoami(host: CommandHost, call: CommandCall) -> Reply:
    msg = call.msg
    where = "this DM" if msg.chat_type is ChatType.DM else f"chat {msg.chat_id}"
    return Reply(f"Your {msg.platform} id is {msg.sender.id} ({where}).")


async def _help(host: CommandHost, call: CommandCall) -> Reply:
    return Reply(help_text(call.spell))


# The core's commands: those before the capabilities' in /help and the menus, then those after.
CORE: tuple[CommandSpec, ...] = (
    CommandSpec("stop", _stop, "stop the current answer (and drop messages waiting behind it)",
                "Stop the current answer", urgent=True),
    CommandSpec("new", _new, "start a fresh conversation (the old one is kept)", "Start a fresh conversation"),
    CommandSpec("reset", _new, ""),
    CommandSpec("status", _status, "model, context use, tokens and cost of this conversation",
                "Model, context and cost of this conversation"),
    CommandSpec("compact", _compact, "summarise the conversation so far (frees context; nothing is deleted)",
                "Summarise the conversation so far to free context"),
)
CORE_AFTER: tuple[CommandSpec, ...] = (
    CommandSpec("whoami", _whoami, "your id on this platform, for an allowlist", "Your id on this platform"),
    CommandSpec("stopall", _stopall, "stop every run in this chat (owners)", urgent=True, owners_only=True),
    CommandSpec("help", _help, "this list", "What I can do"),
    CommandSpec("start", _help, ""),
)


@cache
def _table() -> dict[str, Any]:
    from bot.capabilities import registry  # its specs declare commands with CommandSpec: read on first use

    commands = (*CORE, *(c for spec in registry.specs() for c in spec.commands), *CORE_AFTER)
    by_name = {spec.name: spec for spec in commands}
    if len(by_name) != len(commands):
        raise ValueError("two commands of one name: " + ", ".join(sorted(c.name for c in commands)))
    return {"COMMANDS": commands, "BY_NAME": by_name, "NAMES": tuple(by_name),
            # what a platform registers with its own menu (Telegram's command list, Slack's and
            # Discord's slash commands): (name, description); adapters read it through bot.channels
            "MENU": tuple((c.name, c.menu) for c in commands if c.menu)}


if TYPE_CHECKING:  # made on first use by __getattr__ below
    COMMANDS: tuple[CommandSpec, ...]
    BY_NAME: dict[str, CommandSpec]
    NAMES: tuple[str, ...]
    MENU: tuple[tuple[str, str], ...]


def __getattr__(name: str) -> Any:
    """``COMMANDS``, ``BY_NAME``, ``NAMES`` and ``MENU``: the whole table, core and capabilities."""
    if name in ("COMMANDS", "BY_NAME", "NAMES", "MENU"):
        return _table()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def help_text(spell: Callable[[str], str] = lambda name: f"/{name}") -> str:
    """``/help``'s text, each command as ``spell`` types it on the platform at hand."""
    return "\n".join(f"{spell(spec.name)} – {spec.help}" for spec in _table()["COMMANDS"] if spec.help)


def by_name(name: str) -> CommandSpec:
    """The table's entry of the command ``name``."""
    return cast(CommandSpec, _table()["BY_NAME"][name])


def command_names() -> tuple[str, ...]:
    """Every command's name, the core's and the capabilities'."""
    return cast(tuple[str, ...], _table()["NAMES"])


def parse_command(text: str) -> Command | None:
    """``/name args`` -> Command for the commands we know; None for plain text, an unknown
    command (the model sees it), or one addressed to a bot (``/name@bot``: a channel strips
    its own bot's name)."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, _, args = text[1:].partition(" ")
    name, _, target = head.lower().partition("@")
    if target or name not in _table()["BY_NAME"]:
        return None
    return Command(name, args.strip())


def status_text(*, model: str, context_tokens: int, context_window: int, input_tokens: int, output_tokens: int,
                cost: float, turns: int, running: bool, queued: int, cache_read_tokens: int = 0,
                last_compaction: tuple[int, int] | None = None) -> str:
    """``context_tokens``: the size of the next request (``Agent.next_request_tokens``);
    ``last_compaction``: its tokens before and after (``Agent.last_compaction``)."""
    share = context_tokens / context_window * 100 if context_window else 0.0
    state = "a run is active" if running else "idle"
    if queued:
        state += f", {queued} message{'s' if queued != 1 else ''} waiting"
    cached = f" ({cache_read_tokens:,} from cache)" if cache_read_tokens else ""
    compacted = (f"Last compaction: {last_compaction[0]:,} -> {last_compaction[1]:,} tokens\n"
                 if last_compaction else "")
    return (f"Model: {model}\n"
            f"Context: {context_tokens:,} of {context_window:,} tokens ({share:.0f}%)\n"
            f"{compacted}"
            f"This conversation: {turns} turns, {input_tokens:,} tokens in{cached}, {output_tokens:,} out, "
            f"${cost:.4f}\n"
            f"Now: {state}")
