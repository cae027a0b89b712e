"""The channel port: what the core asks of a platform and what a platform brings.

A platform package (``adapters/<name>/``) imports from here only (plus ``bot.messages``
and ``bot.errors``); the core's output pipeline (``bot.outbound``) builds on it too, and
the port imports neither.

- ``channel``: ``Channel``, ``Inbox``, ``MessageShape``, ``Measure``, ``Status``, ``SendFailed``
- ``capabilities``: ``Streams`` (with ``LiveDraft``), ``Notes``, ``Asks`` (with ``Choice``),
  ``Interrupts``, ``SendsVoice``, ``SendsPhoto``, ``Named``, ``Windowed``, ``RecallsInbound`` (with ``LastHeard``),
  ``ReportsUndelivered`` (with ``Undelivered``, ``Reports``):
  what only some channels can do, checked with ``isinstance``
- ``dialect``: the interface of a platform's format (``Dialect``), the
  ``Atom``s a dialect writes and the helpers that make them, ``PLAIN``
- ``leases``: ``Leases``, ``Held``, ``UsesLeases``, ``SOLE``, ``while_held``: what only one of several instances
  may run (a poller, a shard), held by lease
- ``lifecycle``: the closed future, the failure that ended it and the owned tasks every
  channel keeps
- ``spec`` and ``registry``: ``ChannelSpec`` (with ``ChannelSetup``, what ``chatgate init`` asks) and
  the channels by name; ``checks``: ``Check``, a line of ``chatgate doctor`` (a platform's live
  checks); ``probing``: the one HTTP request of such a live check (``http_json``)
- the config building blocks a platform's ``channels.<name>`` model is made of (from
  ``bot.config.types``), the command menu (``bot.commands``), ``Backoff``
"""

from bot.backoff import Backoff
from bot.channels.capabilities import (
    Asks,
    Choice,
    Connects,
    Interrupts,
    LastHeard,
    LiveDraft,
    Named,
    Notes,
    OfPeople,
    RecallsInbound,
    Reports,
    ReportsUndelivered,
    SendsPhoto,
    SendsVoice,
    SpellsCommands,
    Streams,
    Undelivered,
    Windowed,
    spelling,
)
from bot.channels.channel import Channel, Inbox, Measure, MessageShape, SendFailed, Status
from bot.channels.checks import Check, Outcome
from bot.channels.dialect import (
    HR,
    PLAIN,
    Atom,
    Dialect,
    Mark,
    quote_lines,
    text_atoms,
    wrap,
)
from bot.channels.leases import SOLE, Held, Leases, UsesLeases, while_held
from bot.channels.lifecycle import Lifecycle
from bot.channels.pacing import Pacer
from bot.channels.probing import http_json
from bot.channels.spec import ChannelSetup, ChannelSpec
from bot.commands import MENU as COMMAND_MENU
from bot.commands import NAMES as COMMAND_NAMES
from bot.config.types import (
    ChannelConfig,
    ChannelSection,
    Float,
    GroupConfig,
    Groups,
    Int,
    Secret,
    Section,
    Streaming,
    Url,
    secret,
)
from bot.messages import Target

__all__ = [
    "COMMAND_MENU", "COMMAND_NAMES", "HR", "PLAIN", "Asks", "Atom", "Backoff", "Channel", "ChannelConfig",
    "ChannelSection", "ChannelSpec", "Check", "Choice", "Connects", "Dialect", "Float", "GroupConfig",
    "Groups", "Held", "Inbox", "Int", "Interrupts", "LastHeard", "Leases", "Lifecycle", "MessageShape", "LiveDraft",
    "Mark", "Measure", "Named", "Notes", "OfPeople", "Outcome", "Pacer", "RecallsInbound", "Reports",
    "ReportsUndelivered", "Secret", "Section", "SOLE", "SendFailed", "SendsPhoto", "SendsVoice", "SpellsCommands",
    "spelling", "Status", "Streaming", "Streams", "Target", "Undelivered", "Url", "UsesLeases", "Windowed",
    "quote_lines", "while_held", "ChannelSetup", "http_json", "secret", "text_atoms", "wrap",
]
