"""The config's models (``models``, ``agent``, ``pricing``, ``providers``) as the runtime takes
them: a ``Catalog``, the price table's cost, and ``open_models``, which makes one provider
per backend in use."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from bot.errors import ConfigError
from bot.providers import make_provider
from bot.providers.base import Provider
from bot.providers.pricing import Price
from bot.providers.pricing import cost as table_cost
from bot.routing.router import ModelNotes, Models
from bot.routing.spec import Catalog, Cost, ModelSpec

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig, ModelPrice, NamedModelConfig


def price_of(price: ModelPrice) -> Price:
    """A cache price left out is 0.0 in a ``Price``: "no separate price", billed as input."""
    return Price(price.input, price.output, price.cache_read or 0.0, price.cache_write or 0.0)


def cost_of(cfg: CoreConfig) -> Cost:
    """USD of a request by the price table, with ``pricing:`` overriding or adding rows."""
    return partial(table_cost, overrides={model: price_of(p) for model, p in cfg.pricing.items()})


def spec_of(name: str, entry: NamedModelConfig, max_tokens: int) -> ModelSpec:
    return ModelSpec(name, entry.provider, entry.model, entry.api, entry.window, entry.max_tokens or max_tokens,
                     entry.reasoning_effort, price_of(entry.pricing) if entry.pricing else None, entry.allowed)


def catalog_of(cfg: CoreConfig) -> Catalog:
    a = cfg.agent
    named = tuple(spec_of(name, entry, a.max_tokens) for name, entry in cfg.models.entries().items())
    default = next((spec for spec in named if spec.name == a.model), None) or ModelSpec(
        "", a.provider, a.model, "chat", a.window, a.max_tokens)
    return Catalog(default, named, a.fallbacks, a.fallback_on_choice, cfg.models.switch, cfg.models.titles)


async def open_models(cfg: CoreConfig, store: ModelNotes) -> Models:
    """The configured models with their providers, one per backend; the caller closes it
    (``Models.aclose``). A provider without its key is a ``ConfigError``."""
    catalog = catalog_of(cfg)
    made: dict[str, Provider] = {}
    try:
        for spec in (catalog.default, *catalog.named):
            if spec.backend in made:
                continue
            connection = getattr(cfg.providers, spec.provider)
            if connection.api_key is None:  # load_config insists on it; a config built in code may not
                raise ConfigError(f"providers.{spec.provider}.api_key", "not set")
            made[spec.backend] = make_provider(
                spec.backend, api_key=connection.api_key.get_secret_value(), base_url=connection.base_url,
                timeout=connection.timeout, max_retries=connection.max_retries,
                retry_after_cap=connection.retry_after_cap)
    except BaseException:
        for provider in made.values():
            await provider.aclose()
        raise
    return Models(catalog, made, store, cost_of(cfg))
