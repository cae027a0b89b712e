"""Context windows per model: how many tokens one request (prompt and answer) may hold.

Found like prices (``bot.providers.pricing.longest_key``): the longest key that is the
whole model name or a prefix of it ending at a ``-``; a ``vendor/`` prefix is ignored. A model the
table does not know gets ``DEFAULT_CONTEXT_WINDOW``; ``agent.context_window`` in the
config overrides the table for any model (local models, proxies, 1M-token betas).
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.providers.pricing import longest_key

DEFAULT_CONTEXT_WINDOW = 128_000

# a variant (gpt-4o-mini, o3-pro ...) needs a row only when its window differs from its family's
CONTEXT_WINDOWS: Mapping[str, int] = {
    # OpenAI
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Anthropic: 200k for every current model (1M for some with a beta header, set by config)
    "claude": 200_000,
}


def context_window_for(model: str, override: int | None = None) -> int:
    """``override`` when set, else the table's window for ``model``, else the default."""
    if override:
        return override
    best = longest_key(CONTEXT_WINDOWS, model)
    return CONTEXT_WINDOWS[best] if best is not None else DEFAULT_CONTEXT_WINDOW
