"""The building blocks of every config model: typed fields that read YAML strictly, secrets,
and the access keys every platform shares (``ChannelConfig``).

Platform packages build their ``channels.<name>`` model from these (through the port,
``bot.channels``, which re-exports them); nothing here knows a platform.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

Loc = tuple[str | int, ...]


def _no_bool(kind: str) -> BeforeValidator:
    # YAML reads `yes`/`true` as a bool, which pydantic would quietly turn into 1.
    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(kind, "not a number")
        return value

    return BeforeValidator(check)


def _secret_text(value: Any) -> Any:
    # Keys pasted from files often end in a newline; only blank means "not set".
    if isinstance(value, str):
        return value.strip() or None
    return value


def _check_url(value: str) -> str:
    if not re.match(r"https?://[^/\s]+", value):
        raise PydanticCustomError("url", "not an http(s) URL")
    return value  # passed to the SDK exactly as written


Int = Annotated[int, _no_bool("int_type")]
Float = Annotated[float, _no_bool("float_type")]
Secret = Annotated[SecretStr | None, BeforeValidator(_secret_text)]
Name = Annotated[str, Field(min_length=1)]
Url = Annotated[str, AfterValidator(_check_url)]


def secret(env: str, description: str | None = None, examples: list[Any] | None = None) -> Any:
    """A secret field; when the file leaves it out (or null) it is read from ``env``."""
    return Field(default=None, description=description, examples=examples, json_schema_extra={"env": env})


class Section(BaseModel):
    """The base of every config section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_default(cls, data: Any) -> Any:
        # `telegram:` with nothing under it is an empty section, not an error.
        return {} if data is None else data


class CapabilitySection(Section):
    """The base of a capability package's section (``CapabilitySpec.config``, the key
    ``<capability>:``): what ``bot.settings.Config`` asks of every one, each empty unless the
    package says otherwise."""

    def required_secrets(self) -> tuple[tuple[str, ...], ...]:
        """Dotted keys of secrets that must be set for what is switched on (``chatgate run`` stops)."""
        return ()

    def secret_values(self) -> tuple[str, ...]:
        """Secret values that are not ``SecretStr`` fields (headers, env maps), for scrubbing logs."""
        return ()

    def warnings(self) -> list[str]:
        """Allowed but unsafe choices, for ``chatgate check``."""
        return []

    def describe(self) -> list[str]:
        """Lines of ``chatgate check`` (``"label      what"``, secrets masked); none when off."""
        return []

    def private_paths(self) -> tuple[Path, ...]:
        """Files a sandboxed command must never see (a TLS key)."""
        return ()

    def check(self, config: Section) -> None:
        """Rules across sections (the whole file's model, ``CoreConfig``), raised as ``ConfigError``
        naming the key; a top-level section's run once the file is validated, before the models' names."""


OFF_IS_FALSE = BeforeValidator(lambda v: "off" if v is False else v)  # YAML reads a bare `off` as false
PlatformId = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v)]


def _tool_pattern(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_*?\[\]-]{1,64}", value):
        raise PydanticCustomError("tool_pattern", "not a tool name or a glob of tool names such as memory_*")
    return value


ToolPattern = Annotated[str, AfterValidator(_tool_pattern)]  # a tool name, or a glob of names (`memory_*`)


class ToolRulesConfig(Section):
    """Which tools are offered: ``allow`` absent means every tool, ``[]`` none; ``deny`` wins."""

    allow: tuple[ToolPattern, ...] | None = Field(default=None, description="only these tools (names or globs such "
        "as \"memory_*\"); null: every tool, []: none")
    deny: tuple[ToolPattern, ...] = Field(default=(), description="never these (wins over allow), e.g. [web_fetch]")


def _group_entry(value: Any) -> Any:
    # a plain id (`- -100123`) is short for `- {id: -100123}`
    return {"id": value} if isinstance(value, (str, int)) and not isinstance(value, bool) else value


class GroupConfig(Section):
    """One allowed group: its chat id (``"*"``: every group) and its own tool rules."""

    id: PlatformId = Field(description="the group's chat id on its platform; \"*\": every other group")
    tools: ToolRulesConfig = Field(default=ToolRulesConfig(), description="its own tool rules, narrowing "
        "tools.allow/deny")

    def __repr__(self) -> str:
        return repr(self.id) if self.tools == ToolRulesConfig() else f"{self.id!r} (tools {self.tools!r})"


# The allowed groups of a platform: chat ids, or {id, tools: {allow, deny}}; "*" allows every
# group. A platform that calls them otherwise keeps this type under its own key (Slack's
# ``channels``: ``groups: Groups = Field(default=(), alias="channels")``).
Groups = tuple[Annotated[GroupConfig, BeforeValidator(_group_entry)], ...]


class AccessConfig(Section):
    """Who may talk to the bot on one platform (DESIGN section 5). A platform says the keys in its own
    words (its user ids) in ``model_config``'s ``json_schema_extra["descriptions"]`` (``bot.setup.keys``)."""

    dm_policy: Literal["allowlist", "pairing", "open", "disabled"] = Field(default="allowlist", description=(
        "allowlist: only allow_from | pairing: strangers get a code you approve with `chatgate pairing approve "
        "CODE` | open | disabled"))
    allow_from: tuple[PlatformId, ...] = Field(default=(), description="user ids allowed to DM (members of an "
        "allowed group need not be listed); an entry that can never match stops start-up")
    group_policy: Literal["allowlist", "open", "disabled"] = Field(default="allowlist", description="allowlist: "
        "only the groups below | open | disabled")
    groups: Groups = Field(default=(), examples=[[
            -1001234567890, {"id": -1009876543210, "tools": {"allow": ["read_file", "list_files", "memory_*"]}},
            {"id": "*", "tools": {"deny": ["web_fetch"]}}]], description="group chat ids, or [\"*\"] for every "
        "group the bot is in; an entry may carry its own tool rules, which narrow tools.allow/deny")
    require_mention: bool = Field(default=True, description="in groups, answer only when mentioned or replied to; "
        "other messages are kept as context (last 50)")
    owners: tuple[PlatformId, ...] = Field(default=(), description="user ids that may use admin commands "
        "(/stopall), get tools.owners_only tools, and are exempt from limits")

    # The platform's rule for user ids, so that an entry that can never match (a username
    # where an id is needed) stops start-up instead of silently locking people out. A
    # channel's config model overrides these two; the default takes any non-empty id.
    user_id_pattern: ClassVar[str] = r".+"
    user_id_hint: ClassVar[str] = "not a user id on this platform"

    @field_validator("allow_from", "owners")
    @classmethod
    def _user_ids_can_match(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        for value in ids:
            if not re.fullmatch(cls.user_id_pattern, value):
                raise PydanticCustomError("user_id", "{value} can never match: {hint}",
                                          {"value": json.dumps(value, ensure_ascii=False), "hint": cls.user_id_hint})
        return ids

    @model_validator(mode="after")
    def _groups_once(self) -> AccessConfig:
        ids = [g.id for g in self.groups]
        if dupes := sorted({i for i in ids if ids.count(i) > 1}):
            raise PydanticCustomError("duplicate", "groups lists {ids} more than once", {"ids": ", ".join(dupes)})
        return self

    def group(self, chat_id: str) -> GroupConfig | None:
        """The entry of ``chat_id`` in ``groups``, else the ``"*"`` entry, else None."""
        exact = next((g for g in self.groups if g.id == chat_id), None)
        return exact or next((g for g in self.groups if g.id == "*"), None)


# How a run's text shows while it streams (bot.outbound.progress): off; edit, one draft message;
# native, the platform's own stream.
Streaming = Literal["off", "edit", "native"]


class ChannelSection(Section):
    """What every ``channels.<name>`` model is, the terminal's too: ``enabled``, and the
    secrets it needs when enabled."""

    enabled: bool = Field(default=False, description="true: `chatgate run` starts this platform")

    def required_secrets(self) -> tuple[str, ...]:
        """The secret fields (dotted below this section) this configuration needs when enabled;
        a platform overrides it when its mode decides (Telegram's webhook secret). It may raise
        ``ConfigError`` for a missing non-secret value that the mode needs."""
        return tuple(name for name, field in type(self).model_fields.items()
                     if isinstance(field.json_schema_extra, dict) and "env" in field.json_schema_extra)


class ChannelConfig(AccessConfig, ChannelSection):
    """The base of every platform's ``channels.<name>`` model (the terminal, with its one
    trusted user, is a plain ``ChannelSection``): the access keys, and what the core reads of
    every platform besides ``enabled``. A platform narrows the two below to what it supports,
    with its own defaults (Telegram streams ``off`` or ``edit``, Slack ``native`` by default;
    Discord takes files up to 25 MB)."""

    streaming: Streaming = "off"
    max_download_mb: Annotated[Float, Field(gt=0)] = 20.0  # the largest file fetched from a message

    @property
    def max_download_bytes(self) -> int:
        return int(self.max_download_mb * 1024 * 1024)
