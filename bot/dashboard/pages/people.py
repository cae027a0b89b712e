"""People: what each person used today and over 30 days against the limits, owners marked,
and the pairing requests waiting for an operator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.dashboard.pages.layout import Viewer, action, badge, page, section, table
from bot.limits import LimitSettings
from bot.store.base import ApprovedSender, PairingCode
from bot.web.charts import bars, meter
from bot.web.html import Html, count, duration, join, render, usd, when

DAYS = 30


@dataclass(frozen=True, slots=True)
class PersonUsage:
    person: str  # platform:user_id
    name: str
    owner: bool
    daily_tokens: tuple[int, ...]  # the last DAYS UTC days, oldest first: the last one is today
    daily_cost: tuple[float, ...]

    @property
    def today_tokens(self) -> int:
        return self.daily_tokens[-1] if self.daily_tokens else 0

    @property
    def today_cost(self) -> float:
        return self.daily_cost[-1] if self.daily_cost else 0.0


def people_page(viewer: Viewer, *, usage: Sequence[PersonUsage], limits: LimitSettings, owners: Sequence[str],
                pending: Sequence[PairingCode], approved: Sequence[ApprovedSender], now: float) -> Html:
    parts = [section("Pairing requests", pairing_table(viewer, pending, now), ident="pairing",
                     note=Html("People who wrote to the bot on a platform with <code>dm_policy: pairing</code>. "
                               "Approve lets them in (as <code>chatgate pairing approve CODE</code> does); Deny drops "
                               "the request (writing again asks anew).")),
             section("Usage", usage_table(usage, limits), ident="usage", note=_limits_note(limits)),
             section("Owners", owners_list(owners), ident="owners",
                     note="From the config (channels.<platform>.owners): exempt from limits, may use admin commands."),
             section("Approved by pairing", approved_table(approved), ident="approved")]
    return page("People", join(parts), viewer, active="people")


def _limits_note(limits: LimitSettings) -> str:
    shown = []
    if limits.daily_tokens:
        shown.append(f"{limits.daily_tokens:,} tokens")
    if limits.daily_cost_usd:
        shown.append(f"{usd(limits.daily_cost_usd)}")
    budget = f"Daily limit per person: {' and '.join(shown)} (owners exempt)." if shown else "No daily limit is set."
    return f"Tokens in and out and cost per UTC day, the last {DAYS} days. {budget}"


def usage_table(usage: Sequence[PersonUsage], limits: LimitSettings) -> Html:
    rows = []
    for p in usage:
        limit_tokens = None if p.owner else limits.daily_tokens
        limit_cost = None if p.owner else limits.daily_cost_usd
        today = []
        if limit_tokens:
            today.append(render('<div class="budget"><span>{} of {} tokens</span>{}</div>', count(p.today_tokens),
                                count(limit_tokens), meter(p.today_tokens, limit_tokens,
                                                           f"{p.today_tokens:,} of {limit_tokens:,} tokens today")))
        else:
            today.append(render('<div class="budget"><span>{} tokens</span></div>', count(p.today_tokens)))
        if limit_cost:
            today.append(render('<div class="budget"><span>{} of {}</span>{}</div>', usd(p.today_cost), usd(limit_cost),
                                meter(p.today_cost, limit_cost, f"{usd(p.today_cost)} of {usd(limit_cost)} today")))
        else:
            today.append(render('<div class="budget"><span>{}</span></div>', usd(p.today_cost)))
        month = render("{} tokens · {}", count(sum(p.daily_tokens)), usd(sum(p.daily_cost)))
        chart = bars([float(t) for t in p.daily_tokens], float(limit_tokens) if limit_tokens else None,
                     f"Tokens per day over {DAYS} days, {p.person}")
        who = join([render("{}<br><small>{}</small>", p.name or p.person, p.person if p.name else ""),
                    badge("owner", "info") if p.owner else Html("")], " ")
        rows.append((who, join(today), month, chart))
    return table(("Person", "Today", f"{DAYS} days", "Tokens per day"), rows, css="grid usage",
                 empty=f"Nobody used the model in the last {DAYS} days.")


def pairing_table(viewer: Viewer, pending: Sequence[PairingCode], now: float) -> Html:
    rows = []
    for p in pending:
        buttons = (join([action("/people/approve", "Approve", viewer, fields={"code": p.code}, css="button primary"),
                         action("/people/deny", "Deny", viewer, fields={"code": p.code}, css="button")], " ")
                   if viewer.may_act else render('<span class="muted">{}</span>', "an operator decides"))
        rows.append((p.user_name or "—", f"{p.platform}:{p.user_id}", render("<code>{}</code>", p.code),
                     when(p.created_at), f"in {duration(p.expires_at - now)}", buttons))
    return table(("Name", "Account", "Code", "Asked", "Expires", ""), rows, css="grid pairing",
                 empty="No pairing request is waiting.")


def owners_list(owners: Sequence[str]) -> Html:
    if not owners:
        return render('<p class="empty">{}</p>', "No owner is configured.")
    return render('<ul class="chips">{}</ul>', join(render("<li>{}</li>", o) for o in owners))


def approved_table(approved: Sequence[ApprovedSender]) -> Html:
    return table(("Name", "Account", "Approved"),
                 ((a.name or "—", f"{a.platform}:{a.user_id}", when(a.approved_at)) for a in reversed(approved)),
                 empty="Nobody was approved by pairing yet.")
