"""What a platform package registers: one ``ChannelSpec``.

Its name, its config model (the keys under ``channels.<name>``), a builder that imports
the platform SDK only when called, formatting hints for the prompt, what ``chatgate check``
and ``chatgate doctor`` (live: its token, its settings on the platform) find wrong, and what
``chatgate init`` asks and checks live for it (``ChannelSetup``). The registry
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
class ChannelSetup(Generic[C]):
    """What ``chatgate init`` asks for a platform, and how it checks the answers live.

    ``asks``: the keys asked, dotted below ``channels.<name>``, in order, each with where to find
    it; a secret key is asked without echo and written as ``${VAR}`` (its variable), its value
    going to ``.env``; another key is written as given. ``urls``: keys of the platform's servers,
    taken from ``<NAME>_<KEY>`` in the environment (``TELEGRAM_BASE_URL``), and asked when the
    platform cannot be reached. ``probe``: a live look with those answers, a short line of who
    the bot is; it raises ``ConfigError`` naming the key the platform refused (asked again), or
    ``ChannelError`` when the platform cannot be reached. ``owner``: where a person finds their
    user id there. ``await_code``: waits up to the given seconds for a direct message to the bot
    holding the code; its sender's user id (None when time is up)."""

    asks: tuple[tuple[str, str], ...]
    probe: Callable[[C], Awaitable[str]]
    urls: tuple[str, ...] = ()
    owner: str = ""
    await_code: Callable[[C, str, float], Awaitable[str | None]] | None = None


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
    setup: ChannelSetup[C] | None = None  # what `chatgate init` asks and checks live (None: not offered there)
