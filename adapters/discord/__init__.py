"""The Discord channel (discord.py 2). Importing this package loads only pydantic and
``bot.channels``; ``build`` imports discord.py."""

from __future__ import annotations

from adapters.discord.config import DiscordConfig, problems
from adapters.discord.doctor import doctor
from adapters.discord.setup import SETUP
from bot.channels import Channel, ChannelSpec

HINTS = (
    "Discord renders Markdown itself: **bold**, _italic_, ~~strike~~, `code`, fenced code blocks with a "
    "language, > quotes, lists and headings up to ###. It has no tables: for tabular data use a list, or a "
    "code block no wider than about 60 characters. A message holds 2000 characters; longer answers are "
    "split, so prefer short ones. Nobody is ever pinged: do not write @everyone, @here or role mentions."
)


def build(config: DiscordConfig) -> Channel:
    from adapters.discord.channel import DiscordChannel

    return DiscordChannel(config)


SPEC = ChannelSpec("discord", DiscordConfig, build, hints=HINTS, display="Discord", check=problems, doctor=doctor,
                   setup=SETUP)
