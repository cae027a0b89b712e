"""``channels.discord``: the Discord channel's keys.

Access on Discord has two levels where other platforms have one: a guild (server) holds
channels, and a channel holds threads and forum posts. ``guilds`` lists the servers whose
every channel is allowed; ``channels`` lists single channels (a thread or forum post is
allowed when its parent channel is), each an id or, like Telegram's ``groups``,
``{id, tools: {allow, deny}}`` with its own tool rules; ``"*"`` in either allows every
guild. The channel applies that allowlist itself, before anything reaches the core
(``group_allowed``): a message from a guild or channel that is not allowed is dropped there
and nothing of it is stored. ``groups`` is therefore not a key here but derived: the
``channels`` entries (for their tool rules) and a ``"*"`` entry, so that the core's
generic group check passes what the channel let through. Everything else (``dm_policy``,
``allow_from``, ``owners``, ``require_mention``) is decided by the core as on every platform.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from bot.channels import ChannelConfig, Float, GroupConfig, Int, Secret, Url, secret

Id = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v)]

API_BASE = "https://discord.com/api/v10"
GATEWAY_URL = "wss://gateway.discord.gg/"


def _check_ws_url(value: str) -> str:
    if not re.match(r"wss?://[^/\s]+", value):
        raise PydanticCustomError("url", "not a ws:// or wss:// URL")
    return value


WsUrl = Annotated[str, AfterValidator(_check_ws_url)]
Entry = Annotated[GroupConfig, BeforeValidator(
    lambda v: {"id": v} if isinstance(v, (str, int)) and not isinstance(v, bool) else v)]  # an id is short for {id}


class DiscordConfig(ChannelConfig):
    model_config = ConfigDict(json_schema_extra={"descriptions": {
        "allow_from": "user ids, numbers (Developer Mode > Copy User ID), quoted",
        "group_policy": "allowlist: only the guilds and channels below | open | disabled",
        "require_mention": "false needs the Message Content intent (Bot page on the portal)"}})

    user_id_pattern: ClassVar[str] = r"[0-9]{1,21}"  # snowflakes
    user_id_hint: ClassVar[str] = ("Discord user ids are numbers such as 80351110224678912 "
                                   "(Developer Mode, then Copy User ID), not names")

    token: Secret = secret("DISCORD_BOT_TOKEN", description="required when enabled; Developer Portal > Bot > Reset "
        "Token")
    api_base: Url = Field(default=API_BASE, description="REST base with the API version; a proxy if you use one")
    gateway_url: WsUrl = Field(default=GATEWAY_URL, description="the gateway (ws:// or wss://); resumes go here too")
    guilds: tuple[Id, ...] = Field(default=(), description="server ids whose every channel is allowed, or [\"*\"]")
    channels: tuple[Entry, ...] = Field(default=(), description="single channel ids; a thread or forum post follows "
        "its parent; an entry may be {id: \"...\", tools: {allow: [...], deny: [...]}}")
    streaming: Literal["off", "edit"] = Field(default="off", description="off | edit: one message edited (at most "
        "once a second) as it is written")
    shard_count: Annotated[Int, Field(ge=1, le=4096)] | None = Field(default=None, examples=[2], description="several "
        "instances: the gateway in this many shards (a guild's events on shard (guild id >> 22) % shard_count, DMs "
        "on shard 0)")
    shards: tuple[Annotated[Int, Field(ge=0)], ...] | None = Field(default=None, examples=[[0]], description="the "
        "shard ids this instance runs; left out: each shard whose lease it can hold (taken over when its instance "
        "dies)")
    allow_bots: bool = Field(default=False, description="answer other bots and webhooks (loop guard: 20 "
        "exchanges/min per chat)")
    max_download_mb: Annotated[Float, Field(gt=0, le=500)] = Field(default=25.0, description="larger attachments "
        "are refused")
    # Derived, not a key: the channel has already applied guilds/channels (see the module doc).
    groups: tuple[GroupConfig, ...] = Field(default=(), exclude=True)

    @field_validator("groups", mode="before")
    @classmethod
    def _not_a_key(cls, value: Any) -> Any:
        raise PydanticCustomError("groups_key", "not a Discord key: list server ids in guilds, channel ids in channels")

    @model_validator(mode="after")
    def _shards_fit(self) -> DiscordConfig:
        if self.shards is not None:
            if self.shard_count is None:
                raise PydanticCustomError("shards", "shards needs shard_count (how many shards the bot has in all)")
            if not self.shards or any(s >= self.shard_count for s in self.shards) or len(set(self.shards)) < len(
                    self.shards):
                raise PydanticCustomError("shards", "shards must list distinct shard ids below shard_count")
        return self

    @model_validator(mode="after")
    def _derive_groups(self) -> DiscordConfig:
        entries = self.channels if any(c.id == "*" for c in self.channels) else (*self.channels, GroupConfig(id="*"))
        object.__setattr__(self, "groups", entries)  # a frozen model: derived once, here
        return self


def group_allowed(config: DiscordConfig, guild_id: str, channel_id: str, parent_id: str | None = None) -> bool:
    """May a message in this guild channel (or thread of ``parent_id``) reach the core?"""
    if config.group_policy == "disabled":
        return False
    if config.group_policy == "open":
        return True
    channels = {entry.id for entry in config.channels}
    if "*" in config.guilds or "*" in channels or guild_id in config.guilds:
        return True
    return channel_id in channels or (parent_id is not None and parent_id in channels)


def problems(config: DiscordConfig) -> list[str]:
    """What ``chatgate check`` reports about an enabled Discord channel, as dotted-key lines."""
    out: list[str] = []
    if config.dm_policy == "allowlist" and not config.allow_from and not config.owners:
        out.append("channels.discord.allow_from: empty, so nobody can DM the bot "
                   "(add user ids from Developer Mode, or set dm_policy: pairing)")
    if config.group_policy == "allowlist" and not config.guilds and not config.channels:
        out.append("channels.discord.guilds: no guild or channel is allowed, so the bot answers in DMs only "
                   "(add server ids to guilds or channel ids to channels)")
    if not config.require_mention:
        out.append("channels.discord.require_mention: false needs the Message Content intent "
                   "(Developer Portal > Bot > Privileged Gateway Intents)")
    return out
