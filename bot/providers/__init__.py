"""LLM providers, chosen by name from a plain registry.

Each entry points at ``"module:Class"``; the module (and with it its SDK) is imported
only when that provider is made, so start-up never pays for an SDK it does not use.
Built-ins register like extras would::

    register("mistral", "my_pkg.mistral:MistralProvider")
    async with aclosing(make_provider("anthropic", api_key=key, base_url=None,
                                      timeout=60, max_retries=2)) as provider:
        ...
"""

from __future__ import annotations

import importlib
from typing import Any

from bot.errors import ConfigError
from bot.providers.base import Provider

_REGISTRY: dict[str, str] = {}


def register(name: str, target: str) -> None:
    """Make ``make_provider(name, ...)`` build ``target`` ("package.module:Class")."""
    if ":" not in target:
        raise ValueError(f"provider target must look like 'package.module:Class', not {target!r}")
    _REGISTRY[name] = target


def available() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


def make_provider(
    name: str,
    *,
    api_key: str,
    base_url: str | None,
    timeout: float,
    max_retries: int,
    retry_after_cap: float = 60.0,
) -> Provider:
    """Build the named provider. The caller owns it: ``await provider.aclose()`` closes
    its HTTP client. An unknown name is a ``ConfigError`` on the key ``provider``."""
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise ConfigError("provider", f"unknown provider {name!r}", f"use one of: {', '.join(available())}") from None
    module_name, _, class_name = target.partition(":")
    cls: Any = getattr(importlib.import_module(module_name), class_name)
    provider: Provider = cls(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries,
                             retry_after_cap=retry_after_cap)
    return provider


register("openai", "bot.providers.openai:OpenAIProvider")
register("openai-responses", "bot.providers.openai_responses:ResponsesProvider")  # a named model's api: responses
register("anthropic", "bot.providers.anthropic:AnthropicProvider")

__all__ = ["Provider", "available", "make_provider", "register"]
