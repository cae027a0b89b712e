"""One YAML file -> typed, validated, frozen config, checked before anything starts.

This package is the machinery and the core's keys; the file's whole model, with a section
per registered channel, is assembled by the composition root (``bot.settings``: ``Config``
and ``load_config``), since the channels' models come from the channel registry and the
registry's platform packages build their models on this package.

``load(model, path)`` reads the file, expands ``${VAR}`` / ``${VAR:-default}`` from the
environment in string values of the parsed tree (``$${`` is a literal ``${``), fills each
secret that the file leaves out from its environment variable, and validates the result
into the models. Every mistake raises ``ConfigError`` as one line naming the dotted key
and the fix; only the first mistake is reported.

Without a path, ``./config.yaml`` is used if present, else the built-in defaults plus
``OPENAI_API_KEY``/``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``,
``CHATGATE_PROVIDER`` and ``CHATGATE_MODEL``.

``base_url`` values go to the SDKs exactly as written: OpenAI's includes ``/v1`` (vLLM
``http://host:8000/v1``, Ollama ``http://localhost:11434/v1``; such servers still need some
key, and any non-empty value works, e.g. ``OPENAI_API_KEY=local``); Anthropic's is the root.

Secrets are ``SecretStr``: their repr is masked, ``describe()`` shows at most the ends.
``load`` insists on the secrets that will be used; a config built in code (tests) does not.
The package imports only pydantic and PyYAML; it runs at every start.

- ``types``: field types, secrets, ``Section``, what every channel's section is
  (``ChannelSection``) and the base of every platform's (``ChannelConfig``)
- ``schema``: the core sections, ``CoreConfig`` (all but the platforms' sections)
- ``loading``: YAML, ``${VAR}``, secrets from the environment, ``load``
- ``wording``: pydantic errors as one line naming the key and the fix

Names of ``schema`` and ``loading`` are imported lazily (PEP 562): a platform's config
model, built on ``bot.config.types`` through the port, loads no YAML and no core section.
"""

from __future__ import annotations

from typing import Any

from bot.config.types import (
    AccessConfig,
    CapabilitySection,
    ChannelConfig,
    ChannelSection,
    Float,
    GroupConfig,
    Groups,
    Int,
    Loc,
    Name,
    Secret,
    Section,
    Streaming,
    ToolRulesConfig,
    Url,
    secret,
)

_LAZY = {
    "CoreConfig": "schema", "AgentConfig": "schema", "DEFAULT_MODELS": "schema",
    "ProviderConfig": "schema", "dotted": "schema", "ToolsConfig": "tools", "WebFetchConfig": "tools",
    "load": "loading", "DEFAULT_PATH": "loading",
}

__all__ = ["AccessConfig", "CapabilitySection", "ChannelConfig", "ChannelSection", "Float", "GroupConfig", "Groups", "Int", "Loc", "Name",
           "Secret", "Section", "Streaming", "ToolRulesConfig", "Url", "secret", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bot.config' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"bot.config.{module}"), name)
