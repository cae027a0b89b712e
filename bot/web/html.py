"""HTML with escaping on by default: ``Html`` is text that already is HTML, anything else is
escaped where it is put into a page.

    render("<td>{}</td>", name)            # name escaped (quotes too: safe in attributes)
    render("<td>{}</td>", Html("<b>x</b>"))  # Html goes in as it is
    join(render("<li>{}</li>", n) for n in names)

``Html(...)`` is written only around constants (a tag, a fixed sentence with ``<code>``); text
that comes from anywhere else reaches a page through ``render``, ``escape`` or ``join``. The
formatting helpers (``ago``, ``usd``, ``count`` …) return plain text, escaped like the rest.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import quote


class Html(str):
    """Text that is HTML already: never escaped again."""

    __slots__ = ()


def escape(value: object) -> Html:
    """``value`` as HTML text: itself when it is ``Html``, else escaped (``& < > " '``)."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def render(template: str, *args: object, **kwargs: object) -> Html:
    """``template`` (a constant) with its ``{}`` fields filled by escaped arguments."""
    return Html(template.format(*(escape(a) for a in args), **{k: escape(v) for k, v in kwargs.items()}))


def join(parts: Iterable[Html], separator: str = "") -> Html:
    return Html(escape(separator).join(escape(p) for p in parts))


def path(*segments: object) -> str:
    """A URL path from segments, each percent-encoded (``/runs/{id}``)."""
    return "/" + "/".join(quote(str(s), safe="") for s in segments)


def when(ts: float | None) -> str:
    """An instant as the page shows it: UTC, to the minute; one the calendar cannot hold (a
    row written by hand) as its number, never an error."""
    if not ts:
        return "—"
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, ValueError, OSError):
        return f"instant {ts:.0f} (outside the calendar)"


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def ago(ts: float | None, now: float | None = None) -> str:
    if not ts:
        return "—"
    return f"{duration((time.time() if now is None else now) - ts)} ago"


def usd(cost: float) -> str:
    """Dollars: cents from $1 on, else up to four decimals ($0.012, $0.0003)."""
    if cost == 0:
        return "$0"
    if cost >= 1:
        return f"${cost:,.2f}"
    if cost < 0.0001:
        return "<$0.0001"
    shown = f"{cost:.4f}".rstrip("0")
    return f"${shown}0" if len(shown.split(".")[1]) < 2 else f"${shown}"


def count(n: int) -> str:
    if n >= 10_000_000:
        return f"{n / 1_000_000:.0f}M"
    if n >= 100_000:
        return f"{n / 1000:.0f}k"
    return f"{n:,}"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
