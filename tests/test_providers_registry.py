"""make_provider, the registry, and lazy SDK imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import bot.providers as providers
from bot.errors import ConfigError
from bot.providers import available, make_provider, register
from bot.providers.anthropic import AnthropicProvider
from bot.providers.openai import OpenAIProvider
from bot.providers.wire import Wire

ROOT = Path(__file__).resolve().parents[1]


class Recorder:
    """A stand-in provider class: remembers how it was built."""

    name = "recorder"

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.mark.parametrize(("name", "cls"), [("openai", OpenAIProvider), ("anthropic", AnthropicProvider)])
async def test_builtins(name: str, cls: type) -> None:
    provider = make_provider(name, api_key="k", base_url="http://127.0.0.1:9/v1", timeout=3, max_retries=4,
                             retry_after_cap=12)
    try:
        assert isinstance(provider, cls) and provider.name == name
        assert provider._policy.max_retries == 4 and provider._policy.retry_after_cap == 12  # type: ignore[attr-defined]
        client = provider._client  # type: ignore[attr-defined]
        assert getattr(client, "max_retries", 0) == 0  # we own retries (the OpenAI providers use no SDK)
    finally:
        await provider.aclose()
    assert client.closed if isinstance(client, Wire) else client.is_closed()


def test_unknown_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        make_provider("gemini", api_key="k", base_url=None, timeout=1, max_retries=0)
    assert caught.value.key == "provider" and "anthropic, openai" in str(caught.value)


def test_register_a_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(providers, "_REGISTRY", dict(providers._REGISTRY))
    register("recorder", f"{__name__}:Recorder")
    assert "recorder" in available()
    built: Any = make_provider("recorder", api_key="k", base_url=None, timeout=2, max_retries=1)
    assert isinstance(built, Recorder)
    assert built.kwargs == {"api_key": "k", "base_url": None, "timeout": 2, "max_retries": 1, "retry_after_cap": 60.0}
    with pytest.raises(ValueError):
        register("bad", "no_colon_here")


def test_sdks_are_imported_only_for_the_chosen_provider() -> None:
    script = (
        "import sys\n"
        "import bot.providers, bot.providers.retry, bot.providers.pricing, bot.providers.failures\n"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, 'imported at start-up'\n"
        "p = bot.providers.make_provider('openai', api_key='k', base_url=None, timeout=1, max_retries=0)\n"
        "assert 'bot.providers.openai' in sys.modules, 'the provider'\n"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, 'an SDK imported for openai'\n"
        "p = bot.providers.make_provider('anthropic', api_key='k', base_url=None, timeout=1, max_retries=0)\n"
        "assert 'bot.providers.anthropic' in sys.modules, 'the provider'\n"
        "assert 'anthropic' not in sys.modules and 'openai' not in sys.modules, 'an SDK imported for anthropic'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
