"""Chat commands: one table, parsed here, answered by the intake at once, even during a run.

``COMMANDS`` is the one list: each entry names its handler, its ``/help`` line, its menu
description (the platforms' command menus: Telegram's list, Discord's and Slack's slash
commands; empty keeps it out of menus), whether it is ``urgent`` (never waits behind the
session's earlier messages) and whether it is for ``owners_only``. ``NAMES``, ``MENU`` and
``HELP`` are derived from it, so adding a command is one entry here and its handler.

A handler gets the ``CommandHost`` (what the core can do for a command: the intake
implements it) and the ``CommandCall``, and returns the ``Reply`` owed to the chat, or
None when it answered on its own (``/compact`` runs in the session's lane).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.messages import ChatType, InboundMessage

if TYPE_CHECKING:
    from bot.conversation import Conversation


@dataclass(frozen=True, slots=True)
class CommandCall:
    """One command as it arrived: parsed, with its message, conversation and stored id."""

    command: Command
    msg: InboundMessage
    conversation: Conversation
    inbound_id: int
    owner: bool  # the sender is one of the platform's owners


@dataclass(frozen=True, slots=True)
class Reply:
    """What a command owes the chat: one sentence, and any further inbound messages it
    answers (``/stop`` answers the stopped run's messages too)."""

    text: str
    also_answers: tuple[int, ...] = ()


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

    async def approve(self, call: CommandCall, approval_id: str, how: str) -> str:
        """Answer a waiting approval as the caller (``how``: once, session, always or deny); the reply."""

    def spelling(self, call: CommandCall) -> Callable[[str], str]:
        """How a command is typed on the platform the call came from (``/name`` on most)."""

    async def voice(self, call: CommandCall) -> str:
        """``/voice``'s answer: the chat's voice answers, set to ``on``, ``off`` or ``auto`` when given."""

    async def schedule(self, call: CommandCall) -> str:
        """``/remind``, ``/tasks`` and ``/tz`` (``bot.schedules.commands``): the reply."""

    async def servers(self, call: CommandCall) -> str:
        """``/mcp``'s text: every MCP server, its state, tools and last error."""

    async def model(self, call: CommandCall) -> Reply | None:
        """``/model [name]``: show or pick the conversation's model (None: answered with a picker)."""


class ServerReport(Protocol):
    """What the status commands read of the MCP servers (``bot.mcp.hub.McpHub``)."""

    def overview(self) -> str:
        """Every server: state, tools, last error."""

    def personal(self, conversation: Conversation, user_id: str, owner: bool) -> str:
        """One line: the servers this sender may use in this chat, and their state ("" for none)."""


Handler = Callable[[CommandHost, CommandCall], Awaitable["Reply | None"]]


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    handler: Handler
    help: str  # the /help line (without the name); "" keeps it out of /help
    menu: str = ""  # the description in the platforms' command menus; "" keeps it out
    urgent: bool = False  # answered at once, never behind the session's earlier messages
    owners_only: bool = False  # others get a sentence in a DM, nothing in a group


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


async def _approve(host: CommandHost, call: CommandCall) -> Reply:
    approval_id, _, how = call.command.args.partition(" ")
    how = how.strip().lower() or "once"
    if not approval_id or how not in ("once", "session", "always"):
        return Reply(f"Usage: {host.spelling(call)('approve')} <id> [once|session|always]")
    return Reply(await host.approve(call, approval_id, how))


async def _deny(host: CommandHost, call: CommandCall) -> Reply:
    approval_id = call.command.args.split(" ")[0]
    if not approval_id:
        return Reply(f"Usage: {host.spelling(call)('deny')} <id>")
    return Reply(await host.approve(call, approval_id, "deny"))


async def _voice(host: CommandHost, call: CommandCall) -> Reply:
    return Reply(await host.voice(call))


async def _schedule(host: CommandHost, call: CommandCall) -> Reply:
    return Reply(await host.schedule(call))


async def _mcp(host: CommandHost, call: CommandCall) -> Reply:
    return Reply(await host.servers(call))


async def _model(host: CommandHost, call: CommandCall) -> Reply | None:
    return await host.model(call)


async def _help(host: CommandHost, call: CommandCall) -> Reply:
    return Reply(help_text(host.spelling(call)))


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("stop", _stop, "stop the current answer (and drop messages waiting behind it)",
                "Stop the current answer", urgent=True),
    CommandSpec("new", _new, "start a fresh conversation (the old one is kept)", "Start a fresh conversation"),
    CommandSpec("reset", _new, ""),
    CommandSpec("status", _status, "model, context use, tokens and cost of this conversation",
                "Model, context and cost of this conversation"),
    CommandSpec("compact", _compact, "summarise the conversation so far (frees context; nothing is deleted)",
                "Summarise the conversation so far to free context"),
    CommandSpec("model", _model, "this chat's model; <name> picks one, default goes back",
                "Show or change this chat's model"),
    CommandSpec("whoami", _whoami, "your id on this platform, for an allowlist", "Your id on this platform"),
    CommandSpec("voice", _voice, "voice answers in this chat: on, off, or auto (a voice message gets one)"),
    CommandSpec("stopall", _stopall, "stop every run in this chat (owners)", urgent=True, owners_only=True),
    CommandSpec("approve", _approve, "answer a waiting approval: <id> [once|session|always]", urgent=True),
    CommandSpec("deny", _deny, "deny a waiting approval: <id>", urgent=True),
    CommandSpec("remind", _schedule, "a reminder: <when> <text>, when being in 20m, at 18:00 or tomorrow 9:00"),
    CommandSpec("tasks", _schedule, "your reminders and scheduled tasks here; cancel|pause|resume <id>"),
    CommandSpec("tz", _schedule, "your time zone; tz Europe/Berlin sets it"),
    CommandSpec("mcp", _mcp, "the MCP servers: state, tools, last error (owners)", owners_only=True),
    CommandSpec("help", _help, "this list", "What I can do"),
    CommandSpec("start", _help, ""),
)
BY_NAME: dict[str, CommandSpec] = {spec.name: spec for spec in COMMANDS}
NAMES = tuple(BY_NAME)
# The commands a platform registers with its own menu (Telegram's command list, Slack's and
# Discord's slash commands): (name, description). Adapters read it through bot.channels.
MENU: tuple[tuple[str, str], ...] = tuple((spec.name, spec.menu) for spec in COMMANDS if spec.menu)


def help_text(spell: Callable[[str], str] = lambda name: f"/{name}") -> str:
    """``/help``'s text, each command as ``spell`` types it on the platform at hand."""
    return "\n".join(f"{spell(spec.name)} – {spec.help}" for spec in COMMANDS if spec.help)


HELP = help_text()


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str = ""


def parse_command(text: str, bot_username: str | None = None) -> Command | None:
    """``/name[@bot] args`` -> Command for the commands we know; None for plain text, an
    unknown command (the model sees it), or a command addressed to another bot."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, _, args = text[1:].partition(" ")
    name, _, target = head.partition("@")
    name = name.lower()
    if name not in NAMES:
        return None
    if target and (bot_username is None or target.lower() != bot_username.lower().lstrip("@")):
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
