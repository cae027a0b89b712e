"""What a platform package registers: one ``ChannelSpec``.

Its name, its config model (the keys under ``channels.<name>``), a builder that imports
the platform SDK only when called, formatting hints for the prompt, and what ``chatgate check``
and ``chatgate doctor`` (live: its token, its settings on the platform) find wrong. The registry
(``bot.channels.registry``) finds specs by name; nothing else in the core names a platform.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from bot.channels.channel import Channel
from bot.channels.checks import Check
from bot.config.types import ChannelSection

C = TypeVar("C", bound=ChannelSection)  # the channel's config model


@dataclass(frozen=True, slots=True)
class ChannelSpec(Generic[C]):
    """``build`` imports the SDK; nothing else in the package may."""

    name: str
    config: type[C]  # the keys under channels.<name>: a ChannelConfig (the terminal's: a ChannelSection)
    build: Callable[[C], Channel]
    hints: str = ""  # how to format answers here, for the system prompt
    display: str = ""  # the platform's name in prose ("Telegram")
    check: Callable[[C], list[str]] | None = None  # problems `chatgate check` reports, as dotted-key lines
    doctor: Callable[[C], Awaitable[list[Check]]] | None = None  # `chatgate doctor`'s live checks (its token ...)
