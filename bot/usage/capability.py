"""The usage capability: ``/usage``, the usage footer under answers (``agent.usage_footer``) and
the owners' budget alerts (``limits.alert_at``, of a person's budget and of the whole bot's).
Always on: ``/usage`` is everyone's."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply
from bot.usage.ops import MIGRATIONS

if TYPE_CHECKING:
    from bot.usage.alerts import Alerts

DAY = 86400.0


class Running:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.alerts: Alerts | None = None

    async def usage(self, call: CommandCall) -> Reply:
        from bot.limits import limit_keys
        from bot.usage import ops
        from bot.usage.report import usage_text

        core, msg = self.core, call.msg
        person = limit_keys(msg, core.person_of(msg.platform, msg.sender.id), core.channels.get(msg.platform))[-1]
        now = time.time()
        midnight = now - now % DAY  # 00:00 UTC
        today = await core.store.read(ops.spent(person, midnight))
        month = await core.store.read(ops.spent(person, now - 30 * DAY))
        everyone = await core.store.read(ops.spent(None, midnight)) if call.owner else None
        return Reply(usage_text(today, month, core.limits.settings, exempt=call.owner, bot_today=everyone))

    async def tell_owners(self, alert_id: str, text: str) -> None:
        """Owe each owner on a running platform the alert, in their DM."""
        from bot.messages import ChatType, Target
        from bot.session_keys import SessionKey, format_key
        from bot.usage import ops

        core = self.core
        for owner in core.config.owner_ids():
            platform, _, user_id = owner.partition(":")
            if platform not in core.channels:
                continue
            key = format_key(SessionKey(core.config.agent.id, ChatType.DM, user_id, platform))
            chat = await core.store.read(ops.dm_chat(platform, key)) or user_id
            await core.turns.outbox.say(platform, f"{alert_id}-{owner}", Target(chat, ChatType.DM), text)


async def _usage(running: Running, call: CommandCall) -> Reply:
    return await running.usage(call)


@asynccontextmanager
async def open_usage(core: Core) -> AsyncIterator[Running]:
    from bot.usage.alerts import Alerts
    from bot.usage.report import footer

    running = Running(core)
    mode = core.config.agent.usage_footer
    if mode != "off":
        core.turns.add_footer(lambda result: footer(mode, result.usage, result.cost))
    alert_at, budgets = core.config.limits.alert_at, core.limits.settings
    if alert_at is not None and (budgets.daily_tokens is not None or budgets.daily_cost_usd is not None
                                 or budgets.bot_budget):
        running.alerts = Alerts(core.store, core.limits, alert_at, core.config.owner_ids(), running.tell_owners)
        core.limits.watch(running.alerts.charged)
    try:
        yield running
    finally:
        if running.alerts is not None:
            await running.alerts.aclose()


SPEC = CapabilitySpec("usage", open_usage, migrations=MIGRATIONS, commands=(
    CommandSpec("usage", _usage, "your tokens and cost today and over 30 days, against your limits",
                "Show what you've used", capability="usage"),
))
