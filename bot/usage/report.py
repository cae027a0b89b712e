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
        lines.append(f"The whole bot today: {bot_today.tokens:,} tokens, {money(bot_today.cost)}")
    return "\n".join(lines)


def passed(spent: Spent, settings: LimitSettings, alert_at: float) -> str | None:
    """Which daily budget ``spent`` has reached ``alert_at`` of ("tokens", "cost"), or None."""
    if settings.daily_tokens is not None and spent.tokens >= alert_at * settings.daily_tokens:
        return "tokens"
    if settings.daily_cost_usd is not None and spent.cost >= alert_at * settings.daily_cost_usd:
        return "cost"
    return None


def alert_text(person: str, spent: Spent, settings: LimitSettings, which: str) -> str:
    """The owners' message: who passed which share of which budget."""
    if which == "tokens":
        assert settings.daily_tokens is not None
        used = f"{spent.tokens:,} of {settings.daily_tokens:,} tokens{_share(spent.tokens, settings.daily_tokens)}"
    else:
        assert settings.daily_cost_usd is not None
        used = f"{money(spent.cost)} of {money(settings.daily_cost_usd)}{_share(spent.cost, settings.daily_cost_usd)}"
    return f"Usage alert: {person} has used {used} of today's budget (UTC)."
