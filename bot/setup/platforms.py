"""What ``chatgate init`` needs to know of a platform beyond its ``ChannelSetup``: which of its
keys are secrets (and their variables), the environment's names for the others, and its
section built from the answers, as ``chatgate run`` will read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from bot.channels import ChannelSection, ChannelSpec
from bot.config.wording import from_validation
from bot.errors import ConfigError
from bot.setup.answers import Platform


def secret_var(spec: ChannelSpec[Any], key: str) -> str | None:
    """The environment variable of the secret at ``key`` (dotted below ``channels.<name>``);
    None for a plain key."""
    model: Any = spec.config
    *parents, last = key.split(".")
    for part in parents:
        model = model.model_fields[part].annotation
    extra = model.model_fields[last].json_schema_extra
    return str(extra["env"]) if isinstance(extra, dict) and "env" in extra else None


def env_name(spec: ChannelSpec[Any], key: str) -> str:
    """Where a plain key is found in the environment: ``TELEGRAM_BASE_URL``, ``DISCORD_API_BASE``."""
    return f"{spec.name}_{key.replace('.', '_')}".upper()


def section(spec: ChannelSpec[Any], p: Platform, owners: tuple[str, ...] | None = None) -> ChannelSection:
    """The platform's section as these answers make it; a wrong value is a ``ConfigError``
    naming its key (``channels.<name>.<key>``)."""
    tree: dict[str, Any] = {"enabled": True}
    for key, value in [*p.values.items(), *((k, v) for k, (_, v) in p.secrets.items())]:
        node = tree
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    if owners is not None:
        tree["owners"] = list(owners)
    try:
        return spec.config.model_validate(tree)
    except ValidationError as exc:
        raise _worded(exc, spec) from None


def _worded(exc: ValidationError, spec: ChannelSpec[Any]) -> ConfigError:
    error = from_validation(exc, {}, spec.config)
    return ConfigError(f"channels.{spec.name}.{error.key}" if error.key else f"channels.{spec.name}",
                       error.problem, error.fix)


def urls_from(spec: ChannelSpec[Any], env: Mapping[str, str]) -> dict[str, str]:
    """The platform's server URLs that the environment names (``TELEGRAM_BASE_URL``)."""
    assert spec.setup is not None
    return {key: env[env_name(spec, key)] for key in spec.setup.urls if env.get(env_name(spec, key))}
