"""The terminal channel: a DM between the local OS user and the assistant."""

from __future__ import annotations

from adapters.console.config import ConsoleConfig
from bot.channels import Channel, ChannelSpec


def build(config: ConsoleConfig) -> Channel:
    from adapters.console.channel import ConsoleChannel

    return ConsoleChannel()


SPEC = ChannelSpec("console", ConsoleConfig, build, hints="This is a terminal: plain Markdown.",
                   display="a terminal")
