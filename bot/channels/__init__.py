"""The channel port and what every channel shares. Adapters import from here only
(plus ``bot.messages`` and ``bot.errors``)."""

from bot.channels.base import (
    Channel,
    ChannelSpec,
    Inbox,
    Limits,
    LiveDraft,
    Measure,
    SendFailed,
    Status,
    Target,
)
from bot.commands import MENU as COMMAND_MENU
from bot.config import ChannelConfig, Float, Int, Secret, Url, secret

__all__ = [
    "COMMAND_MENU", "Channel", "ChannelConfig", "ChannelSpec", "Float", "Inbox", "Int", "Limits", "LiveDraft",
    "Measure", "Secret", "SendFailed", "Status", "Target", "Url", "secret",
]
