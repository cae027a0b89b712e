"""The owners told once a day when a person, or the whole bot, passes ``limits.alert_at`` of a
daily budget.

``charged`` is a ``Meter`` watching every charge as it arrives (``PersonLimits.watch``): a
person's spending today, as the budgets count it, is compared with the share, and so is the
whole bot's (``limits.bot_daily_tokens``, ``bot_daily_cost_usd``; every charge counts, the
owners' too); the first time it passes, the alert is claimed in the database (one row per
subject and UTC day, the subject ``BOT`` for the whole bot, so several instances and
restarts give it once) and each owner is owed a message in their DM.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from bot.limits import LimitSettings, PersonLimits
from bot.store.base import Charge
from bot.store.schema_steps import StepStore
from bot.tasks import OwnedTasks
from bot.usage import ops
from bot.usage.report import Spent, alert_text, passed

log = logging.getLogger(__name__)

Tell = Callable[[str, str], Awaitable[None]]  # (alert id, text) -> every owner owed it
BOT = "bot"  # the whole bot's subject (a person's always has a colon)


def day_of(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


class Alerts:
    def __init__(self, store: StepStore, limits: PersonLimits, alert_at: float, owners: Sequence[str], tell: Tell,
                 *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._limits = limits
        self._settings: LimitSettings = limits.settings
        self._alert_at = alert_at
        self._owners = frozenset(owners)  # exempt from the budgets: never the subject of an alert
        self._tell = tell
        self._clock = clock
        self._given: set[tuple[str, str]] = set()  # (day, person) alerted (by any instance), known here
        self._checking: set[str] = set()
        self._tasks = OwnedTasks()

    def charged(self, charges: Sequence[Charge]) -> None:
        """The ``Meter``: check each person charged, in a task of its own (a model call never waits)."""
        day = day_of(self._clock())
        if self._settings.bot_budget and (day, BOT) not in self._given and BOT not in self._checking:
            self._checking.add(BOT)
            self._tasks.spawn(self._check(BOT, day), "usage alert of the whole bot")
        if self._settings.daily_tokens is None and self._settings.daily_cost_usd is None:
            return
        for c in charges:
            if c.person in self._owners or (day, c.person) in self._given or c.person in self._checking:
                continue
            self._checking.add(c.person)
            self._tasks.spawn(self._check(c.person, day), f"usage alert {c.person}")

    async def _check(self, person: str, day: str) -> None:
        try:
            bot = person == BOT
            tokens, cost = await (self._limits.bot_today() if bot else self._limits.today(person))
            which = passed(Spent(tokens, cost), self._settings, self._alert_at, bot=bot)
            if which is None:
                return
            self._given.add((day, person))
            if await self._store.write(ops.claim_alert(day, person, which, self._clock())):
                log.info("usage alert: %s passed %.0f%% of the daily %s budget", person, self._alert_at * 100, which)
                await self._tell(f"usage-alert-{day}-{person}", alert_text(None if bot else person, Spent(tokens, cost),
                                                                           self._settings, which))
        except Exception:  # noqa: BLE001 - an alert is a courtesy: a failure is logged, the run goes on
            log.warning("usage alert for %s failed", person, exc_info=True)
        finally:
            self._checking.discard(person)

    async def aclose(self) -> None:
        await self._tasks.stop()
