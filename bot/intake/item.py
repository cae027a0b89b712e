"""What the intake holds of one inbound message while it is decided (``Item``), and its settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.conversation import ChannelInfo, Conversation
from bot.messages import InboundMessage
from bot.session_keys import DmScope, GroupScope

MAX_OUTSTANDING = 256  # inbound messages stored but not yet decided, every session together


@dataclass(frozen=True, slots=True)
class IntakeSettings:
    agent_id: str
    dm_scope: DmScope = "per-user"
    identity_links: Mapping[str, Sequence[str]] | None = None
    group_scope: GroupScope = "per-group"  # per-user: a session per member in groups
    channel_info: Mapping[str, ChannelInfo] | None = None  # platform -> what its channel shows the prompt
    recover_max_age: float = 600.0
    max_download: Mapping[str, int] | None = None  # platform -> bytes
    context_retention: float = 7 * 86400.0  # seconds a group message kept only as context stays stored
    max_outstanding: int = MAX_OUTSTANDING


@dataclass(slots=True)
class Item:
    msg: InboundMessage
    conversation: Conversation
    inbound_id: int
    received: float
    recovered: bool = False
