"""One YAML file -> typed, validated, frozen config, checked before anything starts.

``load_config(path)`` reads the file, expands ``${VAR}`` / ``${VAR:-default}`` from the
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
``load_config`` insists on the secrets that will be used; a ``Config`` built in code (tests)
does not. The package imports only pydantic and PyYAML (and each channel's config model,
never its SDK); it runs at every start.

- ``types``: field types, secrets, ``Section``, the shared access keys (``ChannelConfig``)
- ``schema``: the core sections, ``Config``, ``channels`` built from the channel registry
- ``loading``: YAML, ``${VAR}``, secrets from the environment, ``load_config``
- ``wording``: pydantic errors as one line naming the key and the fix

Names are imported lazily (PEP 562), so that a channel's config model can build on
``bot.config.types`` while ``schema`` reads the channel registry.
"""

from __future__ import annotations

from typing import Any

from bot.config.types import (
    AccessConfig,
    ChannelConfig,
    Float,
    GroupConfig,
    Int,
    Loc,
    Name,
    Secret,
    Section,
    ToolRulesConfig,
    Url,
    secret,
)

_LAZY = {
    "Config": "schema", "ChannelsConfig": "schema", "AgentConfig": "schema", "DEFAULT_MODELS": "schema",
    "ProviderConfig": "schema", "dotted": "schema", "ToolsConfig": "schema", "WebFetchConfig": "schema",
    "load_config": "loading", "DEFAULT_PATH": "loading",
}

__all__ = ["AccessConfig", "ChannelConfig", "Float", "GroupConfig", "Int", "Loc", "Name", "Secret", "Section",
           "ToolRulesConfig", "Url", "secret", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bot.config' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"bot.config.{module}"), name)
