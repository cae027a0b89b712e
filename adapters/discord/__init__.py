"""The Discord channel (discord.py 2). Importing this package loads only pydantic and
``bot.channels``; ``build`` imports discord.py."""

from __future__ import annotations

from typing import Any

from adapters.discord.config import DiscordConfig, problems
from bot.channels import Channel, ChannelSpec

HINTS = (
    "Discord renders Markdown itself: **bold**, *italic*, __underline__, ~~strike~~, `code`, fenced code "
    "blocks with a language, > quotes, - lists and headings up to ###. It has no tables: put tabular data in "
    "a code block. Links as [text](url). Keep answers short; long ones are split into several messages. "
    "Never mention @everyone, @here or roles: nobody is pinged by the bot anyway."
)


def build(config: Any) -> Channel:
    from adapters.discord.channel import DiscordChannel

    return DiscordChannel(config)


SPEC = ChannelSpec("discord", DiscordConfig, build, hints=HINTS, display="Discord", check=problems)
