"""What a request cost, in USD, from its token usage.

Prices are USD per million tokens. A model finds its row by the longest key that is
the whole name or a prefix of it ending at a ``-``: ``claude-sonnet-4-5-20250929``
finds ``claude-sonnet-4-5``, ``gpt-4o-mini-2024-07-18`` finds ``gpt-4o-mini``, and
``gpt-5.4`` does not fall back to ``gpt-5``. A ``vendor/`` prefix (OpenRouter style)
is ignored. Unknown models cost 0.0: pricing is an estimate, never a reason to fail.

The table is a snapshot of the vendors' list prices (2025); config overrides or adds
rows (``overrides``) when prices change or a self-hosted model has a price.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.providers.base import Usage

_PER_TOKEN = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. A cache price of 0.0 means "no separate price": those
    tokens are billed as ordinary input (nobody reads a cache for free)."""

    input: float
    output: float
    cache_read: float = 0.0  # prompt tokens read from the provider's cache
    cache_write: float = 0.0  # prompt tokens written to it (Anthropic, 5-minute TTL)


def _anthropic(input: float, output: float) -> Price:
    """Anthropic's cache prices follow from the input price: reads 0.1x, 5-min writes 1.25x."""
    return Price(input, output, round(input * 0.1, 4), round(input * 1.25, 4))


DEFAULT_PRICES: Mapping[str, Price] = {
    # OpenAI
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "o1": Price(15.00, 60.00, 7.50),
    "o1-mini": Price(1.10, 4.40, 0.55),
    "o1-pro": Price(150.00, 600.00),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o3-pro": Price(20.00, 80.00),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic: Opus 4 and 4.1 kept the old price; Opus 4.5 and later cost a third of it.
    "claude-opus-4": _anthropic(5.00, 25.00),
    "claude-opus-4-0": _anthropic(15.00, 75.00),
    "claude-opus-4-20250514": _anthropic(15.00, 75.00),
    "claude-opus-4-1": _anthropic(15.00, 75.00),
    "claude-sonnet-4": _anthropic(3.00, 15.00),
    "claude-haiku-4": _anthropic(1.00, 5.00),
    "claude-3-opus": _anthropic(15.00, 75.00),
    "claude-3-7-sonnet": _anthropic(3.00, 15.00),
    "claude-3-5-sonnet": _anthropic(3.00, 15.00),
    "claude-3-5-haiku": _anthropic(0.80, 4.00),
    "claude-3-haiku": _anthropic(0.25, 1.25),
}


def bare_name(model: str) -> str:
    """``model`` as the tables know it: lower case, without a ``vendor/`` prefix."""
    return model.strip().lower().rsplit("/", 1)[-1]


def longest_key(keys: Iterable[str], model: str) -> str | None:
    """The longest of ``keys`` (the first of equals) that is ``model``'s bare name or a prefix
    of it ending at a ``-``; None when none is."""
    name = bare_name(model)
    matches = [key for key in keys if name == key.lower() or name.startswith(key.lower() + "-")]
    return max(matches, key=len, default=None)


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The row for ``model`` (overrides first), or None when no row matches."""
    table = {**DEFAULT_PRICES, **(overrides or {})}
    best = longest_key(table, model)
    return table[best] if best is not None else None


def cost(model: str, usage: Usage, overrides: Mapping[str, Price] | None = None) -> float:
    """USD for one request. ``usage.input_tokens`` counts the whole prompt, cached parts
    included; those are billed at the cache prices instead of the input price."""
    price = price_for(model, overrides)
    return 0.0 if price is None else billed(price, usage)


def billed(price: Price, usage: Usage) -> float:
    """USD for one request at ``price`` (a named model's own price, whatever id the server names)."""
    uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    return (
        uncached * price.input
        + usage.cache_read_tokens * (price.cache_read or price.input)
        + usage.cache_write_tokens * (price.cache_write or price.input)
        + usage.output_tokens * price.output
    ) / _PER_TOKEN
