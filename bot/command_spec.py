"""The nouns of chat commands: a parsed ``Command``, the ``CommandCall`` a handler gets, the
``Reply`` it owes, and the ``CommandSpec`` of one table entry. The table and the parsing are
``bot.commands``; a capability declares its entries with these (``bot.capabilities``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.messages import InboundMessage

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
    spell: Callable[[str], str] = field(default=lambda name: f"/{name}", compare=False)  # a command as typed there


@dataclass(frozen=True, slots=True)
class Reply:
    """What a command owes the chat: one sentence, and any further inbound messages it
    answers (``/stop`` answers the stopped run's messages too)."""

    text: str
    also_answers: tuple[int, ...] = ()


Handler = Callable[[Any, CommandCall], Awaitable["Reply | None"]]  # (the host or the capability, the call)


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    handler: Handler
    help: str  # the /help line (without the name); "" keeps it out of /help
    menu: str = ""  # the description in the platforms' command menus; "" keeps it out
    urgent: bool = False  # answered at once, never behind the session's earlier messages
    owners_only: bool = False  # others get a sentence in a DM, nothing in a group
    capability: str = ""  # whose command it is: its handler gets the running capability ("": the core's host)
    off: str = ""  # the reply when that capability is not running


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str = ""
