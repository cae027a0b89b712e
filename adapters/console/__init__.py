"""The terminal channel: a DM between the local OS user and the assistant."""

from __future__ import annotations

from typing import Any

from bot.channels import ChannelSpec, Section


class ConsoleConfig(Section):
    enabled: bool = True


def build(config: ConsoleConfig) -> Any:
    from adapters.console.adapter import ConsoleChannel

    return ConsoleChannel()


SPEC = ChannelSpec("console", ConsoleConfig, build, hints="This is a terminal: plain Markdown.",
                   display="a terminal")
