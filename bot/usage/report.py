"""What people read: the footer under an answer, ``/usage``, the owners' alert. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from bot.limits import LimitSettings
from bot.providers.base import Usage


@dataclass(frozen=True, slots=True)
class Spent:
    tokens: int = 0
    cost: float = 0.0


def money(cost: float) -> str:
    """Dollars with the cents that matter: $1.23, $0.0042."""
    return f"${cost:.2f}" if cost >= 1 or cost == 0 else f"${cost:.4f}"


def footer(mode: str, usage: Usage, cost: float) -> str:
    """The line under an answer (``agent.usage_footer``); "" when off or nothing was used."""
    tokens = usage.input_tokens + usage.output_tokens
    if mode == "off" or tokens <= 0:
        return ""
    line = f"{tokens:,} tokens ({usage.input_tokens:,} in, {usage.output_tokens:,} out)"
    return f"_{line} · {money(cost)}_" if mode == "cost" else f"_{line}_"


def _share(used: float, limit: float | None) -> str:
    return f" ({used / limit:.0%})" if limit else ""


def usage_text(today: Spent, month: Spent, settings: LimitSettings, *, exempt: bool,
               bot_today: Spent | None = None) -> str:
    """``/usage``: today (UTC) against the daily budgets, and the last 30 days."""
    tokens = f"{today.tokens:,} tokens"
    if settings.daily_tokens is not None and not exempt:
        tokens += f" of {settings.daily_tokens:,}{_share(today.tokens, settings.daily_tokens)}"
    cost = money(today.cost)
    if settings.daily_cost_usd is not None and not exempt:
        cost += f" of {money(settings.daily_cost_usd)}{_share(today.cost, settings.daily_cost_usd)}"
    lines = [f"Today (UTC): {tokens}, {cost}", f"Last 30 days: {month.tokens:,} tokens, {money(month.cost)}"]
    if exempt:
        lines.append("As an owner you have no daily budget.")
    elif settings.daily_tokens is None and settings.daily_cost_usd is None:
        lines.append("There is no daily budget.")
    else:
        lines.append("Budgets renew at 00:00 UTC.")
    if bot_today is not None:
        tokens_of, cost_of = budgets(settings, bot=True)
        bot_tokens = f"{bot_today.tokens:,} tokens" + (f" of {tokens_of:,}{_share(bot_today.tokens, tokens_of)}"
                                                       if tokens_of is not None else "")
        bot_cost = money(bot_today.cost) + (f" of {money(cost_of)}{_share(bot_today.cost, cost_of)}"
                                            if cost_of is not None else "")
        lines.append(f"The whole bot today: {bot_tokens}, {bot_cost}")
    return "\n".join(lines)


def budgets(settings: LimitSettings, *, bot: bool = False) -> tuple[int | None, float | None]:
    """The daily (tokens, cost) budgets of a person, or of the whole bot."""
    if bot:
        return settings.bot_daily_tokens, settings.bot_daily_cost_usd
    return settings.daily_tokens, settings.daily_cost_usd


def passed(spent: Spent, settings: LimitSettings, alert_at: float, *, bot: bool = False) -> str | None:
    """Which daily budget ``spent`` has reached ``alert_at`` of ("tokens", "cost"), or None
    (``bot``: the whole bot's budgets, else a person's)."""
    tokens, cost = budgets(settings, bot=bot)
    if tokens is not None and spent.tokens >= alert_at * tokens:
        return "tokens"
    if cost is not None and spent.cost >= alert_at * cost:
        return "cost"
    return None


def alert_text(person: str | None, spent: Spent, settings: LimitSettings, which: str) -> str:
    """The owners' message: who (None: the whole bot) passed which share of which budget."""
    tokens, cost = budgets(settings, bot=person is None)
    if which == "tokens":
        assert tokens is not None
        used = f"{spent.tokens:,} of {tokens:,} tokens{_share(spent.tokens, tokens)}"
    else:
        assert cost is not None
        used = f"{money(spent.cost)} of {money(cost)}{_share(spent.cost, cost)}"
    if person is None:
        return f"Usage alert: the whole bot has used {used} of its budget for today (UTC)."
    return f"Usage alert: {person} has used {used} of today's budget (UTC)."
