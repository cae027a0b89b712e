"""``chatgate init --non-interactive``: the same setup from flags and the environment, for
scripts. Keys and tokens come from their usual variables (``OPENAI_API_KEY``,
``TELEGRAM_BOT_TOKEN`` ...), a platform's other keys from ``<PLATFORM>_<KEY>``
(``WHATSAPP_PHONE_NUMBER_ID``, ``TELEGRAM_BASE_URL``); each is checked live unless
``--no-check``. The first problem is one line naming the key, and nothing is written."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from bot.config import dotenv
from bot.errors import ConfigError, ProviderError
from bot.setup import checks
from bot.setup.answers import Answers, Platform, config_text, env_text, write
from bot.setup.flow import PROVIDERS, existing, next_steps
from bot.setup.platforms import env_name, secret_var, section, urls_from


def scripted(path: Path, args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Raises ``ConfigError`` on the first problem; writes both files, or nothing."""
    from bot.channels import registry
    from bot.config.schema import DEFAULT_MODELS

    if (found := existing(path)) and not args.force:
        raise ConfigError(str(found[0]), "exists already", "--force replaces it (.env keeps its other variables)")
    name = args.provider or env.get("CHATGATE_PROVIDER") or (
        "anthropic" if env.get("ANTHROPIC_API_KEY") and not env.get("OPENAI_API_KEY") else "openai")
    if name not in PROVIDERS:
        raise ConfigError("agent.provider", f"unknown provider {name!r}", "use openai or anthropic")
    _, key_var, url_var = PROVIDERS[name]
    key = env.get(key_var, "").strip()
    if not key:
        raise ConfigError(f"providers.{name}.api_key", "missing", f"set {key_var}")
    base_url = args.base_url or env.get(url_var) or None
    model = args.model or env.get("CHATGATE_MODEL") or DEFAULT_MODELS[name]
    if not args.no_check:
        try:
            checks.blocking(checks.provider, name, key, base_url, model)
        except ProviderError as exc:
            raise ConfigError(f"providers.{name}", f"the check failed: {exc}",
                              f"check {key_var}, the model and the base URL") from None
    owners: dict[str, list[str]] = {}
    for entry in args.owner:
        platform, _, uid = entry.partition(":")
        if not uid:
            raise ConfigError("--owner", f"{entry!r} is not PLATFORM:USER_ID", "e.g. --owner telegram:123456789")
        owners.setdefault(platform, []).append(uid)
    platforms = []
    for channel in dict.fromkeys(args.channel):
        if channel not in registry.names() or registry.spec(channel).setup is None:
            usable = [n for n in registry.names() if registry.spec(n).setup is not None]
            raise ConfigError("--channel", f"unknown platform {channel!r}", f"use one of: {', '.join(usable)}")
        platforms.append(_platform(channel, tuple(owners.pop(channel, ())), env, check=not args.no_check))
    if owners:
        raise ConfigError("--owner", f"{', '.join(owners)} is not among the --channel platforms")
    exec_tool = bool(args.exec)
    if exec_tool and (problem := checks.sandbox()):
        raise ConfigError("tools.exec.sandbox", problem)
    answers = Answers(name, model, key_var, key, base_url, tuple(platforms), exec_tool)
    env_file = write(path, config_text(answers, path.name), env_text(answers, dotenv.read(path.parent / ".env")))
    print(f"Wrote {path} and {env_file} (mode 600: the secrets).")
    for line in next_steps(answers, path):
        print(line)
    return 0


def _platform(name: str, owners: tuple[str, ...], env: Mapping[str, str], *, check: bool) -> Platform:
    from bot.channels import registry

    spec = registry.spec(name)
    assert spec.setup is not None
    values = urls_from(spec, env)
    secrets: dict[str, tuple[str, str]] = {}
    for key, where in spec.setup.asks:
        var = secret_var(spec, key)
        value = env.get(var or env_name(spec, key), "").strip()
        if not value:
            raise ConfigError(f"channels.{name}.{key}", "missing", f"set {var or env_name(spec, key)}: {where}")
        if var is None:
            values[key] = value
        else:
            secrets[key] = (var, value)
    p = Platform(name, values, secrets, owners)
    built = section(spec, p, owners)
    if check:
        checks.blocking(spec.setup.probe, built)
    return p
