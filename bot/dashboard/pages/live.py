"""Live: the channels, the runs in flight (kept current by ``static/live.js``), deliveries owed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from bot.dashboard.live import LiveRun
from bot.dashboard.pages.layout import Viewer, action, badge, page, section, table
from bot.messages import Answer
from bot.web.html import Html, duration, join, plural, render, when

RUN_HEADERS = ("Session", "Person", "Model", "Elapsed", "Now", "Queued", "")
STANDALONE = Html("This dashboard runs on its own (<code>chatgate dashboard</code>), not inside the bot: it reads "
                  "the bot's database, but runs in flight and their Stop buttons are only on the dashboard that "
                  "<code>chatgate run</code> serves (<code>dashboard.enabled: true</code>).")


@dataclass(frozen=True, slots=True)
class ChannelState:
    name: str
    state: str  # running | stopped | failed
    detail: str = ""


def live_page(viewer: Viewer, *, runs: Sequence[LiveRun] | None, channels: Sequence[ChannelState] | None,
              owed: Sequence[Answer], now: float | None = None) -> Html:
    now = time.time() if now is None else now
    if runs is None:
        body = render('<p class="notice">{}</p>', STANDALONE)
    else:
        body = join([
            render('<p class="live-state"><span id="live-count">{}</span> · <span id="live-status" class="dot">'
                   'connecting…</span></p>', plural(len(runs), "run") + " in flight"),
            run_table(runs, viewer, now),
        ])
    parts = [section("Runs in flight", body, ident="runs"),
             section("Channels", channel_table(channels), ident="channels"),
             section("Deliveries owed", owed_table(owed, now), ident="owed",
                     note="Answers stored but not yet (fully) sent: retried with backoff, and resent first after a "
                          "restart.")]
    return page("Live", join(parts), viewer, active="live", scripts=("live.js",) if runs is not None else ())


def run_table(runs: Sequence[LiveRun], viewer: Viewer, now: float) -> Html:
    rows = []
    for r in runs:
        stop = (action("/live/stop", "Stop", viewer, fields={"run": r.run_id, "instance": r.instance},
                       css="button danger",
                       title="Stop this run, as /stop in its chat does") if viewer.may_act else Html(""))
        tool = r.tool or ("retrying the model" if r.state == "retrying" else
                          "waiting for a slot" if r.state == "waiting" else "thinking")
        on = render("<br><small>on {}</small>", r.instance) if r.instance else Html("")
        cells = [render('<span title="{}">{}</span>{}', r.session, r.label, on),
                 render("{}<br><small>{}</small>", r.person, r.where), r.model,
                 render('<span class="elapsed">{}</span>', duration(now - r.started_at)),
                 render('<span class="tool{}">{}</span>', " idle" if not r.tool else "", tool),
                 str(r.queued) if r.queued else "—", stop]
        rows.append(render('<tr data-run="{}" data-started="{}">{}</tr>', r.run_id, f"{r.started_at:.3f}",
                           join(render('<td data-label="{}">{}</td>', h, c) for h, c in zip(RUN_HEADERS, cells))))
    head = join(render('<th scope="col">{}</th>', h) for h in RUN_HEADERS)
    return render('<div class="table-wrap"><table class="grid runs"><thead><tr>{}</tr></thead>'
                  '<tbody id="live-runs">{}</tbody></table></div><p class="empty" id="live-empty"{}>{}</p>',
                  head, join(rows), Html(" hidden") if rows else Html(""), "No run in flight.")


def channel_table(channels: Sequence[ChannelState] | None) -> Html:
    if channels is None:
        return render('<p class="empty">{}</p>', "Channels run in the bot's process; their state shows on the "
                                                 "dashboard it serves.")
    kinds = {"running": "ok", "stopped": "muted", "failed": "bad", "sending fails": "warn"}
    return table(("Channel", "State", "Detail"),
                 ((c.name, badge(c.state, kinds.get(c.state, "")), c.detail or "—") for c in channels),
                 empty="No channel is enabled.", body_id="live-channels")


def owed_table(owed: Sequence[Answer], now: float) -> Html:
    rows = [(a.platform, a.target.chat_id, f"{a.sent} of {len(a.chunks)}", duration(now - a.created_at),
             badge("failure notice", "warn") if a.failed else "answer") for a in owed]
    return table(("Platform", "Chat", "Parts sent", "Waiting", "Kind"), rows, empty="Nothing owed: every answer "
                 "was delivered.", body_id="live-owed")


def status_payload(channels: Sequence[ChannelState] | None, owed: Sequence[Answer], now: float) -> dict[str, object]:
    """The feed's ``status`` event: what the two lower tables show, as text cells."""
    return {
        "channels": None if channels is None else [[c.name, c.state, c.detail or "—"] for c in channels],
        "owed": [[a.platform, a.target.chat_id, f"{a.sent} of {len(a.chunks)}", duration(now - a.created_at),
                  "failure notice" if a.failed else "answer"] for a in owed],
        "updated": when(now),
    }
