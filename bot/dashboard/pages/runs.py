"""Runs: the traces of recent runs (errors and cost), and one run's spans as a waterfall."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from bot.dashboard.live import session_label
from bot.dashboard.pages.layout import Viewer, badge, link, page, section, table
from bot.tracing import TraceRecord
from bot.web.charts import span_bar
from bot.web.html import Html, clip, count, duration, join, path, plural, render, usd, when

STATUS = {"completed": "ok", "silent": "muted", "failed": "bad", "cancelled": "warn"}


def runs_page(viewer: Viewer, traces: Sequence[TraceRecord], *, session: str = "", failed_only: bool = False) -> Html:
    filters = join([
        link("/runs", "All runs") if (session or failed_only) else render("<strong>{}</strong>", "All runs"),
        render("<strong>{}</strong>", "Failed only") if failed_only else link("/runs?status=failed", "Failed only"),
    ], " · ")
    rows = [(link(path("runs", t.run_id), when(t.started_at)),
             render('<span title="{}">{}</span>', t.session_key, session_label(t.session_key)),
             badge(t.status, STATUS.get(t.status, "")), t.model, str(t.iterations),
             f"{count(t.input_tokens)} in / {count(t.output_tokens)} out", usd(t.cost),
             duration(t.ended_at - t.started_at), clip(t.error or "", 120) or "—")
            for t in reversed(traces)]
    total = sum(t.cost for t in traces)
    note = (f"{plural(len(traces), 'run')}" + (f" of session {session}" if session else "")
            + (", failed ones only" if failed_only else "") + f"; {usd(total)} in all.")
    body = join([render('<p class="filters">{}</p>', filters), render('<p class="note">{}</p>', note),
                 table(("Started", "Session", "Status", "Model", "Steps", "Tokens", "Cost", "Took", "Error"), rows,
                       empty="No run recorded yet.", cols=("nowrap", "", "", "nowrap", "num", "num", "num", "num"))])
    return page("Runs", body, viewer, active="runs")


def run_page(viewer: Viewer, trace: TraceRecord) -> Html:
    t = trace
    facts = render('<dl class="facts"><dt>Run</dt><dd><code>{}</code></dd><dt>Session</dt><dd><a href="{}">{}</a></dd>'
                   '<dt>Status</dt><dd>{}</dd><dt>Model</dt><dd>{}</dd><dt>Started</dt><dd>{}</dd><dt>Took</dt>'
                   '<dd>{}</dd><dt>Tokens</dt><dd>{} in ({} from cache), {} out</dd><dt>Cost</dt><dd>{}</dd></dl>',
                   t.run_id, "/conversations?q=" + quote(t.session_key, safe=""), t.session_key,
                   badge(t.status, STATUS.get(t.status, "")), t.model, when(t.started_at),
                   duration(t.ended_at - t.started_at), f"{t.input_tokens:,}", f"{t.cache_read_tokens:,}",
                   f"{t.output_tokens:,}", usd(t.cost))
    error = render('<p class="error">{}</p>', t.error) if t.error else Html("")
    total = max(t.ended_at - t.started_at, max((s.started_at - t.started_at + s.duration_ms / 1000
                                                for s in t.spans), default=0.0))
    rows = []
    for s in t.spans:
        start = s.started_at - t.started_at
        seconds = s.duration_ms / 1000
        tokens = f"{count(s.input_tokens)} / {count(s.output_tokens)}" if s.input_tokens or s.output_tokens else "—"
        preview = (render('<details><summary>{}</summary><pre class="text">{}</pre></details>', clip(s.preview, 60),
                          s.preview) if s.preview else Html("—"))
        rows.append((badge(str(s.kind), "error" if s.is_error else str(s.kind)), s.name,
                     span_bar(start, seconds, total, str(s.kind), s.is_error),
                     f"+{duration(start)}", duration(seconds), tokens, usd(s.cost) if s.cost else "—", preview))
    spans = table(("Kind", "Name", "Timeline", "At", "Took", "Tokens in / out", "Cost", "Output"), rows,
                  css="grid waterfall", empty="This run recorded no span.",
                  cols=("", "", "", "num", "num", "num", "num"))
    body = join([facts, error, section("Spans", spans, note="Each bar sits where the call ran on the run's time "
                                       "axis; model calls are blue, tools green, sub-agents purple, errors red.")])
    return page(f"Run {t.run_id[:12]}", body, viewer, active="runs")
