"""The images capability: its spec, and the running object (the ``generate_image`` tool).

Off by default (``tools.images.enabled``); the provider's key must be set then."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core
from bot.images.config import ImagesConfig

if TYPE_CHECKING:
    from bot.store.base import Charge
    from bot.tools.base import Tool

KEY = "tools.images"
INSERT_CHARGE = "INSERT INTO charges (person, run_id, tokens, cost, created_at) VALUES (?, ?, ?, ?, ?)"


@dataclass(slots=True)
class Imaging:
    tool: Tool
    client: Any

    def tools(self) -> Sequence[Tool]:
        return (self.tool,)

    async def stop(self) -> None:
        await self.client.close()


@asynccontextmanager
async def open_images(core: Core) -> AsyncIterator[Imaging]:
    import itertools
    import time

    from openai import AsyncOpenAI

    from bot.errors import ConfigError
    from bot.images.generate import image_tool
    from bot.store.op import Op, execute

    section = core.config.section(KEY, ImagesConfig)
    provider = getattr(core.config.providers, section.provider)
    if provider.api_key is None:
        raise ConfigError(f"providers.{section.provider}.api_key", "is not set", "tools.images needs it")
    client = AsyncOpenAI(api_key=provider.api_key.get_secret_value(), base_url=section.base_url or provider.base_url,
                         timeout=section.timeout, max_retries=1)
    serial = itertools.count(1)

    async def charge(run_id: str, charges: Sequence[Charge]) -> None:
        now, n = time.time(), next(serial)

        def store() -> Op[None]:
            for c in charges:
                yield from execute(INSERT_CHARGE, c.person, f"{run_id}-image{n}", c.tokens, c.cost, now)

        await core.store.write(store())
        core.limits.charge(charges)

    tool = image_tool(client, model=section.model, size=section.size, quality=section.quality,
                      price=section.price(), sender=core.turns, charge=charge)
    try:
        yield Imaging(tool, client)
    finally:
        await client.close()


SPEC = CapabilitySpec("images", open_images, config=ImagesConfig, key=KEY,
                      enabled=lambda config: config.section(KEY, ImagesConfig).enabled)
