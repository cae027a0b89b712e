"""``channels.console``: the terminal's one key. Its one user is the local OS user, trusted:
no access keys (the core gives a channel without them no policy: its user is the owner)."""

from __future__ import annotations

from pydantic import Field

from bot.channels import ChannelSection


class ConsoleConfig(ChannelSection):
    enabled: bool = Field(default=True, description="the terminal channel: `chatgate chat`, and `chatgate run` when "
        "started in a terminal")
