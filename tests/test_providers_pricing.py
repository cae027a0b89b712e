"""Cost estimates from token usage."""

from __future__ import annotations

import pytest

from bot.providers.base import Usage
from bot.providers.pricing import DEFAULT_PRICES, Price, cost, price_for

M = 1_000_000


@pytest.mark.parametrize(("model", "row"), [
    ("gpt-4o", "gpt-4o"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4o-mini", "gpt-4o-mini"),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
    ("gpt-4.1-2025-04-14", "gpt-4.1"),
    ("o1-preview", "o1"),
    ("o3-mini-2025-01-31", "o3-mini"),
    ("o4-mini", "o4-mini"),
    ("gpt-5-2025-08-07", "gpt-5"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("claude-opus-4-20250514", "claude-opus-4-20250514"),
    ("claude-opus-4-1-20250805", "claude-opus-4-1"),
    ("claude-opus-4-5-20251101", "claude-opus-4"),
    ("claude-haiku-4-5", "claude-haiku-4"),
    ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ("claude-3-7-sonnet-20250219", "claude-3-7-sonnet"),
    ("Claude-3-Haiku-20240307", "claude-3-haiku"),
    ("openai/gpt-4o-mini", "gpt-4o-mini"),
    ("anthropic/claude-3-opus", "claude-3-opus"),
])
def test_longest_prefix_finds_the_row(model: str, row: str) -> None:
    assert price_for(model) == DEFAULT_PRICES[row]


@pytest.mark.parametrize("model", ["gpt-5.4", "gpt-4omni", "llama3:8b", "", "o3x", "claude-opus"])
def test_unknown_models_cost_nothing(model: str) -> None:
    assert price_for(model) is None
    assert cost(model, Usage(M, M)) == 0.0


def test_plain_input_and_output() -> None:
    assert cost("gpt-4o", Usage(input_tokens=M, output_tokens=M)) == pytest.approx(12.50)
    assert cost("gpt-4o-mini", Usage(input_tokens=2000, output_tokens=500)) == pytest.approx(0.0006)


def test_cached_tokens_are_billed_at_cache_prices() -> None:
    # Anthropic Sonnet: 3 in, 15 out, 0.30 cache read, 3.75 cache write; input counts the whole prompt
    usage = Usage(input_tokens=10 * M, output_tokens=M, cache_read_tokens=6 * M, cache_write_tokens=2 * M)
    assert cost("claude-sonnet-4-5", usage) == pytest.approx(2 * 3 + 6 * 0.30 + 2 * 3.75 + 15)
    # OpenAI gpt-4.1: cached input at 0.50 instead of 2.00
    assert cost("gpt-4.1", Usage(input_tokens=M, cache_read_tokens=M)) == pytest.approx(0.50)


def test_without_a_cache_price_cached_tokens_cost_input() -> None:
    assert cost("o1-pro", Usage(input_tokens=M, cache_read_tokens=M)) == pytest.approx(150)


def test_overrides_replace_rows_and_add_models() -> None:
    overrides = {"gpt-4o": Price(1.0, 2.0), "llama3": Price(0.1, 0.1)}
    assert cost("gpt-4o-2024-11-20", Usage(M, M), overrides) == pytest.approx(3.0)
    assert cost("gpt-4o-mini", Usage(M, 0), overrides) == pytest.approx(0.15)  # a longer default row still wins
    assert cost("llama3-70b", Usage(M, M), overrides) == pytest.approx(0.2)
    assert cost("gpt-4o", Usage(M, M)) == pytest.approx(12.5)  # the defaults are untouched


def test_every_default_row_is_sane() -> None:
    for name, price in DEFAULT_PRICES.items():
        assert name == name.lower() and 0 < price.input <= price.output, name
        assert price.cache_read <= price.input, name
