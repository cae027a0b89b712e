"""``tools.images``: the generate_image tool's section, and its price table."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from bot.config.types import CapabilitySection, Float

# USD per image at the default size and quality (medium, 1024x1024), by model; ``prices`` overrides
PRICES: dict[str, float] = {"gpt-image-1": 0.042, "gpt-image-1-mini": 0.011, "dall-e-3": 0.04, "dall-e-2": 0.02}


class ImagesConfig(CapabilitySection):
    model_config = ConfigDict(json_schema_extra={"description": (
        "generate_image: pictures made on request, docs/guide/images.md")})

    enabled: bool = Field(default=False, description="true: the model gets the generate_image tool; each image is "
        "charged to the people the run serves (daily_cost_usd)")
    provider: Literal["openai"] = Field(default="openai", description="a provider of providers: (its api_key and "
        "base_url), OpenAI-compatible")
    model: str = Field(default="gpt-image-1", description="the images endpoint's model, e.g. gpt-image-1, dall-e-3")
    base_url: str | None = Field(default=None, description="null: the provider's")
    size: Literal["auto", "1024x1024", "1536x1024", "1024x1536", "256x256", "512x512", "1792x1024",
                  "1024x1792"] = Field(default="1024x1024", description="or 1536x1024, 1024x1536, auto")
    quality: Literal["auto", "low", "medium", "high", "standard", "hd"] = Field(default="medium", description="low, "
        "medium, high, auto (as the endpoint takes it)")
    timeout: Annotated[Float, Field(gt=0, le=600)] = Field(default=120.0, description="seconds for one image")
    prices: dict[str, Annotated[Float, Field(ge=0)]] = Field(default={}, description="USD per image by model, over "
        "the built-in table, e.g. {gpt-image-1: 0.05}")

    def price(self) -> float:
        """USD per image of ``model``: ``prices`` first, then the built-in table, else 0."""
        return self.prices.get(self.model, PRICES.get(self.model, 0.0))

    def describe(self) -> list[str]:
        if not self.enabled:
            return []
        return [f"images     {self.model} via {self.provider}, {self.size}, {self.quality}, ${self.price():.3f} each"]
