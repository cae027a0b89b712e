"""What a capability package registers: one ``CapabilitySpec``; what it is given and offers.

A capability (schedules, models, MCP servers, ...) is one package under ``bot/`` that exports
a spec, found through one line of ``bot.capabilities.registry``, the way a platform is one
package and one ``ChannelSpec``. The spec names it, declares its commands (their table
entries: the platforms' menus and ``/help`` know them before anything runs) and says how to
``open`` it: an async context given the ``Core``, entered in the app's exit stack (so it is
closed in reverse order, also when start-up fails half way), that yields the running
capability. What that object offers is found by the small Protocols below, each optional,
saying what it is for, and checked once where the app wires it, never by ``getattr`` at a call
site.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from bot.command_spec import CommandCall, CommandSpec
from bot.store.schema_steps import Migration

if TYPE_CHECKING:
    from argparse import _SubParsersAction

    from bot.access import Access
    from bot.agent.events import EventBus
    from bot.agent.run import PostRunHook
    from bot.channels import Channel
    from bot.config import Section
    from bot.config.schema import CoreConfig
    from bot.conversation import ChannelInfo, Conversation
    from bot.limits import PersonLimits
    from bot.messages import InboundMessage
    from bot.peers import Joined, Peers
    from bot.routing import Models
    from bot.store import AppStore
    from bot.store.pg.base import Connection
    from bot.tools.approval import ApprovalRules
    from bot.tools.base import Tool
    from bot.tools.gate import ToolGate
    from bot.tools.policy import ToolPolicy
    from bot.tools.sandbox import ExecSettings
    from bot.tools.toolset import Toolset
    from bot.turns import Turns
    from bot.workspace import Workspaces


@dataclass(frozen=True, slots=True)
class Core:
    """What the core gives every capability: small and typed. ``turns`` runs and answers turns
    (``start`` one with no inbound message; ``turns.outbox`` owes a chat a message)."""

    config: CoreConfig  # a capability's own section: config.section(name, Model)
    store: AppStore
    channels: dict[str, Channel]
    events: EventBus
    workspaces: Workspaces
    access: Access
    limits: PersonLimits
    turns: Turns
    models: Models  # the configured models and each conversation's (bot.routing)
    gate: ToolGate  # the one gate of every tool call: capabilities add their steps (hooks, approvals)
    rules: ApprovalRules  # which calls need a person
    policy: Callable[[Conversation, bool], ToolPolicy]  # a conversation's tool policy (every sender an owner)
    tool: Callable[[str], Tool | None]  # a registered tool by name (exec, for a task's check)
    spell: Callable[[str], Callable[[str], str]]  # how a command is typed on a platform
    person_of: Callable[[str, str], str | None]  # the linked person of (platform, user id)
    toolsets: list[Toolset]  # what every run is offered beside the built-in tools: a capability may add one
    channel_info: Mapping[str, ChannelInfo]  # platform -> what its channel shows the prompt
    on_sweep: Callable[[Callable[[], Awaitable[None]]], None]  # run on every cluster sweep (SQLite: never)
    sandbox: ExecSettings  # how exec runs a command (its sandbox and bounds), whether exec is on or not
    peers: Peers | None  # the other instances (PostgreSQL with several), None alone
    running: Mapping[str, object]  # the capabilities opened so far, by name
    post_run: list[PostRunHook]  # after each run's turn is stored: one may add its own


@dataclass(frozen=True, slots=True)
class CapabilitySpec:
    """What must be known of a capability before anything runs. Its commands' handlers are given
    the running capability and the ``CommandCall``; ``bot.settings`` composes the sections into the
    file's model; ``migrations`` are applied by name after the core's (by the store at start and by
    ``chatgate migrate``), and its operations run through ``AppStore.read`` and ``AppStore.write``,
    written once for both drivers; each subcommand ``cli`` adds has a ``run`` default, an async
    function of the loaded config and the parsed arguments returning the exit code."""

    name: str
    open: Callable[[Core], AbstractAsyncContextManager[Any]]
    commands: tuple[CommandSpec, ...] = ()
    enabled: Callable[[CoreConfig], bool] = lambda config: True
    config: type[Section] | None = None  # the model of its config key, ``<name>:`` unless ``key`` says
    key: str = ""  # where its section is, dotted, when not ``<name>``: ``memory``, ``tools.browser``
    migrations: tuple[Migration, ...] = ()  # its tables, each named ``<name>/NNNN_what``
    derived: tuple[str, ...] = ()  # globs of its tables rebuilt from others (by triggers): never copied
    cli: Callable[[_SubParsersAction[Any]], None] | None = None  # adds its ``chatgate`` subcommands
    probe: Callable[[CoreConfig], Coroutine[Any, Any, list[str]]] | None = None  # `chatgate check`'s live look, when on
    channels: tuple[str, ...] = ()  # the platforms it brings when enabled (its running object is a ``Channels``)
    # This instance joined to the others sharing its database, before the core is built (the store's
    # fencing, delivery's claims, the shared rates and leases need it): at most one enabled spec has it.
    join: Callable[[CoreConfig, AppStore], AbstractAsyncContextManager[Joined]] | None = None
    # Its tables on PostgreSQL only, with a migration history of their own: applied by ``chatgate
    # migrate`` (and by ``join``); how many were applied.
    postgres: Callable[[Connection], Awaitable[int]] | None = None

    @property
    def section_key(self) -> str:
        """The dotted config key of its section."""
        return self.key or self.name


@runtime_checkable
class Tools(Protocol):
    def tools(self) -> Sequence[Tool]:
        """Tools registered for the agent's runs (after the built-ins: sub-agents never get them)."""
        ...


@runtime_checkable
class StatusLines(Protocol):
    async def status_lines(self, call: CommandCall) -> Sequence[str]:
        """Lines ``/status`` adds for this conversation and sender (none: an empty sequence)."""
        ...


@runtime_checkable
class Presses(Protocol):
    def claims(self, msg: InboundMessage) -> bool:
        """Whether ``msg`` is a press of this capability's buttons (answered at once, outside the
        session's lane)."""
        ...

    async def press(self, msg: InboundMessage, conversation: Conversation, owner: bool) -> None:
        """Answer the press (its sender passed access; the message is marked answered after)."""
        ...


@runtime_checkable
class Starts(Protocol):
    def start(self) -> None:
        """Begin background work, once the channels listen and what was owed went out."""
        ...


@runtime_checkable
class Answers(Protocol):
    """Presses of its own cards that decide for themselves who may press (an approval's: an
    approver need not be someone the bot talks to): answered at once, before access."""

    def answers(self, msg: InboundMessage) -> bool: ...

    async def answer(self, msg: InboundMessage) -> None: ...


@runtime_checkable
class Reminds(Protocol):
    def remind(self, session_key: str, spell: Callable[[str], str]) -> str | None:
        """What a message that arrives in the session is told first (a card there waits), or None."""
        ...


@runtime_checkable
class DecidesHere(Protocol):
    async def decide_here(self, approval_id: str, decision: str, msg: InboundMessage) -> str | None:
        """Another instance asks this one to decide an approval whose run waits here."""
        ...


@runtime_checkable
class Recovers(Protocol):
    async def recover(self) -> None:
        """Once the channels listen, before the stored messages are recovered: settle what a
        previous process left (cards whose runs are gone)."""
        ...


@runtime_checkable
class Stops(Protocol):
    async def stop(self) -> None:
        """End what ``start`` began, first of all at shutdown (before the channels stop and the runs
        are cancelled: nothing new starts after)."""
        ...


@runtime_checkable
class Channels(Protocol):
    def channels(self) -> Mapping[str, Channel]:
        """Channels by platform name, added to the running ones once it opened (before the intake
        starts and the channels are started): the turn runner, delivery and approvals reach them
        as any platform's."""
        ...
