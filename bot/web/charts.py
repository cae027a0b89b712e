"""Charts drawn on the server as SVG: a meter, daily bars, a waterfall's lanes.

Sizes are SVG attributes (no ``style``: the page's CSP forbids inline styles), colours come
from classes in ``app.css``, and every chart has a text equivalent beside it or in a
``<title>`` for screen readers.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.web.html import Html, join, render


def meter(used: float, limit: float | None, label: str) -> Html:
    """How much of a daily limit is used: a bar, red past 90 %; without a limit, nothing."""
    if not limit:
        return Html("")
    share = max(0.0, used / limit)
    width = min(100.0, share * 100)
    kind = "over" if share >= 0.9 else "ok"
    return render('<svg class="meter" viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label="{}">'
                  '<rect class="track" x="0" y="0" width="100" height="8" rx="2"/>'
                  '<rect class="fill {}" x="0" y="0" width="{}" height="8" rx="2"/></svg>',
                  label, kind, f"{width:.1f}")


def bars(values: Sequence[float], limit: float | None, label: str) -> Html:
    """One bar per day (oldest left); a dashed line at the daily limit when there is one."""
    top = max([*values, limit or 0.0, 1e-9])
    width, height, gap = 4.0, 28.0, 1.0
    total = len(values) * (width + gap)
    shapes = []
    for i, value in enumerate(values):
        h = 0.0 if value <= 0 else max(1.0, value / top * height)
        kind = "over" if limit and value >= limit else "day"
        shown = f"{value:,.0f}" if value >= 1 else f"{value:.4f}"
        shapes.append(render('<rect class="{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>', kind,
                             f"{i * (width + gap):.1f}", f"{height - h:.1f}", f"{width:.1f}", f"{h:.1f}",
                             f"{len(values) - 1 - i} days ago: {shown}"))
    if limit:
        y = height - limit / top * height
        shapes.append(render('<line class="limit" x1="0" x2="{}" y1="{}" y2="{}"/>', f"{total:.1f}", f"{y:.1f}",
                             f"{y:.1f}"))
    return render('<svg class="bars" viewBox="0 0 {} {}" preserveAspectRatio="none" role="img" aria-label="{}">{}'
                  '</svg>', f"{total:.1f}", f"{height:.0f}", label, join(shapes))


def span_bar(start: float, length: float, total: float, kind: str, error: bool) -> Html:
    """One row of a waterfall: where a span sits on its run's time axis (0 to ``total`` seconds)."""
    total = max(total, 1e-3)
    x = max(0.0, min(start / total * 100, 99.6))
    w = max(0.4, min(length / total * 100, 100.0 - x))
    return render('<svg class="lane" viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">'
                  '<rect class="span {}{}" x="{}" y="1" width="{}" height="8" rx="1"/></svg>', kind,
                  " error" if error else "", f"{x:.2f}", f"{w:.2f}")
