"""The channel port and what every channel shares. Adapters import from here only
(plus ``bot.messages`` and ``bot.errors``)."""

from bot.backoff import Backoff
from bot.channels.base import (
    Channel,
    ChannelSpec,
    Inbox,
    Limits,
    LiveDraft,
    Measure,
    SendFailed,
    Status,
)
from bot.commands import MENU as COMMAND_MENU
from bot.commands import NAMES as COMMAND_NAMES
from bot.config.types import ChannelConfig, Float, GroupConfig, Int, Secret, Section, Url, secret
from bot.messages import Target

__all__ = [
    "COMMAND_MENU", "Backoff", "Channel", "ChannelConfig", "ChannelSpec", "Float", "GroupConfig", "Inbox", "Int",
    "Limits", "LiveDraft", "COMMAND_NAMES",
    "Measure", "Secret", "Section", "SendFailed", "Status", "Target", "Url", "secret",
]
