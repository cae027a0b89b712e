"""The building blocks of every config model: typed fields that read YAML strictly, secrets,
and the access keys every platform shares (``ChannelConfig``).

Platform packages build their ``channels.<name>`` model from these (through
``bot.channels``); nothing here knows a platform.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, model_validator
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


def _secret(env: str) -> Any:
    """A secret field; when the file leaves it out (or null) it is read from ``env``."""
    return Field(default=None, json_schema_extra={"env": env})


class Section(BaseModel):
    """The base of every config section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_default(cls, data: Any) -> Any:
        # `telegram:` with nothing under it is an empty section, not an error.
        return {} if data is None else data


secret = _secret  # a secret field read from an environment variable when the file leaves it out


PlatformId = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v)]


class AccessConfig(Section):
    """Who may talk to the bot on one platform (DESIGN section 5)."""

    dm_policy: Literal["allowlist", "pairing", "open", "disabled"] = "allowlist"
    allow_from: tuple[PlatformId, ...] = ()  # user ids allowed to DM; members of an allowed group need not be listed
    group_policy: Literal["allowlist", "open", "disabled"] = "allowlist"
    groups: tuple[PlatformId, ...] = ()  # chat ids of allowed groups; "*" allows every group
    require_mention: bool = True
    owners: tuple[PlatformId, ...] = ()  # user ids allowed admin commands (/stopall)


class ChannelConfig(AccessConfig):
    """The base of every platform's ``channels.<name>`` model: access keys plus ``enabled``."""

    enabled: bool = False

    def required_secrets(self) -> tuple[str, ...]:
        """The secret fields (dotted below this section) this configuration needs when enabled;
        a platform overrides it when its mode decides (Telegram's webhook secret). It may raise
        ``ConfigError`` for a missing non-secret value that the mode needs."""
        return tuple(name for name, field in type(self).model_fields.items()
                     if isinstance(field.json_schema_extra, dict) and "env" in field.json_schema_extra)
