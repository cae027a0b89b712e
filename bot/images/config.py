"""``tools.images``: the generate_image tool's section, and its price table."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from bot.config.types import CapabilitySection, Float

# USD per image at the default size and quality (medium, 1024x1024), by model; ``prices`` overrides
PRICES: dict[str, float] = {"gpt-image-1": 0.042, "gpt-image-1-mini": 0.011, "dall-e-3": 0.04, "dall-e-2": 0.02}


class ImagesConfig(CapabilitySection):
    enabled: bool = False
    provider: Literal["openai"] = "openai"  # its api_key (and base_url unless set here) from providers:
    model: str = "gpt-image-1"
    base_url: str | None = None
    size: Literal["auto", "1024x1024", "1536x1024", "1024x1536", "256x256", "512x512", "1792x1024",
                  "1024x1792"] = "1024x1024"
    quality: Literal["auto", "low", "medium", "high", "standard", "hd"] = "medium"
    timeout: Annotated[Float, Field(gt=0, le=600)] = 120.0
    prices: dict[str, Annotated[Float, Field(ge=0)]] = {}

    def price(self) -> float:
        """USD per image of ``model``: ``prices`` first, then the built-in table, else 0."""
        return self.prices.get(self.model, PRICES.get(self.model, 0.0))

    def describe(self) -> list[str]:
        if not self.enabled:
            return []
        return [f"images     {self.model} via {self.provider}, {self.size}, {self.quality}, ${self.price():.3f} each"]
