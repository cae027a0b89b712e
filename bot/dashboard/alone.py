"""``chatgate dashboard``: the dashboard alone, on the bot's database (runs in flight live in
the bot's process: this one shows what the database holds)."""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig


async def serve_alone(config: CoreConfig) -> int:
    """`chatgate dashboard`: the dashboard alone, on the bot's database, until SIGINT or SIGTERM.
    Runs in flight live in the bot's process: this one shows what the database holds."""
    from bot.capabilities.commandline import store_of
    from bot.dashboard.server import Dashboard
    from bot.dashboard.settings import settings_of
    from bot.dashboard.sources import PeoplePolicy
    from bot.limits import LimitSettings
    from bot.tracing import Redactor

    lim = config.limits
    people = PeoplePolicy(LimitSettings(lim.messages_per_minute, lim.daily_tokens, lim.daily_cost_usd),
                          config.owner_ids())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with store_of(config) as store, \
                Dashboard(settings_of(config), store, people=people,
                          redact=Redactor(config.secret_values())) as dashboard:
            print(f"chatgate dashboard at {dashboard.url} (alone: runs in flight show on the one `chatgate run` "
                  "serves); Ctrl-C stops it", flush=True)
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0
