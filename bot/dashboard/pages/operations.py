"""Operations: MCP servers, scheduled jobs, pending approvals, recent failures, and the
dashboard's own audit trail. A source the bot does not have shows as "not configured"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.dashboard.live import session_label
from bot.dashboard.pages.layout import Viewer, action, badge, link, page, section, table
from bot.dashboard.sources import Job, McpServer, PendingApproval
from bot.store.reports import AuditEntry, Failure
from bot.web.html import Html, ago, clip, join, path, render, when

NOT_CONFIGURED = "Not configured in this process."
MCP_STATES = {"ready": "ok", "degraded": "warn", "down": "bad", "connecting": "muted"}


@dataclass(frozen=True, slots=True)
class OperationsView:
    mcp: Sequence[McpServer] | None  # None: no source
    jobs: Sequence[Job] | None
    jobs_controllable: bool
    approvals: Sequence[PendingApproval] | None
    failures: Sequence[Failure]
    actions: Sequence[AuditEntry]


def operations_page(viewer: Viewer, view: OperationsView, now: float) -> Html:
    parts = [section("MCP servers", mcp_table(view.mcp, now), ident="mcp"),
             section("Scheduled jobs", jobs_table(viewer, view.jobs, view.jobs_controllable, now), ident="jobs"),
             section("Pending approvals", approvals_table(view.approvals, now), ident="approvals",
                     note="Tool calls waiting for a person's decision in their chat."),
             section("Recent failures", failures_table(view.failures, now), ident="failures"),
             section("Dashboard actions", actions_table(view.actions), ident="actions",
                     note="Every action taken or refused here, and every login, with who and from where.")]
    return page("Operations", join(parts), viewer, active="operations")


def _absent() -> Html:
    return render('<p class="empty">{}</p>', NOT_CONFIGURED)


def mcp_table(servers: Sequence[McpServer] | None, now: float) -> Html:
    if servers is None:
        return _absent()
    rows = [(s.name, s.transport, badge(s.state, MCP_STATES.get(s.state, "")), str(s.tools),
             ago(s.since, now) if s.since else "—", clip(s.last_error or "", 160) or "—") for s in servers]
    return table(("Server", "Transport", "State", "Tools", "Since", "Last error"), rows,
                 empty="No MCP server is configured.")


def jobs_table(viewer: Viewer, jobs: Sequence[Job] | None, controllable: bool, now: float) -> Html:
    if jobs is None:
        return _absent()
    rows = []
    for j in jobs:
        buttons: Html = Html("—")
        if viewer.may_act and controllable:
            toggle = ("Resume", "resume") if j.paused else ("Pause", "pause")
            buttons = join([action("/operations/" + toggle[1], toggle[0], viewer, fields={"job": j.id}),
                            action("/operations/cancel", "Cancel", viewer, fields={"job": j.id}, css="button danger")],
                           " ")
        state = badge("paused", "warn") if j.paused else badge("active", "ok")
        if j.warning:  # as /tasks marks it: the messages may not reach the person (WhatsApp's 24 hours)
            state = render('{}<br><small class="warning" title="{}">⚠ {}</small>', state, j.warning, j.warning)
        rows.append((render("{}<br><small>{}</small>", j.kind, clip(j.text, 80)), j.rule, session_label(j.session_key),
                     state, when(j.next_at) if j.next_at and not j.paused else "—", buttons))
    return table(("Job", "Rule", "For", "State", "Next", ""), rows, empty="No job is scheduled.",
                 cols=("", "", "", "", "nowrap", "nowrap"))


def approvals_table(approvals: Sequence[PendingApproval] | None, now: float) -> Html:
    if approvals is None:
        return _absent()
    rows = [(a.tool, a.requester, session_label(a.session_key), ago(a.asked_at, now)) for a in approvals]
    return table(("Tool", "Asked by", "In", "Waiting"), rows, empty="No approval is pending.")


def failures_table(failures: Sequence[Failure], now: float) -> Html:
    rows = [(render('<span title="{}">{}</span>', when(f.at), ago(f.at, now)),
             badge(f.kind, "bad" if f.kind == "run" else "warn"),
             link(path("runs", f.run_id), session_label(f.where)) if f.run_id else f.where,
             clip(f.detail, 200) or "—") for f in failures]
    return table(("When", "Kind", "Where", "What"), rows, empty="Nothing failed recently.")


def actions_table(actions: Sequence[AuditEntry]) -> Html:
    rows = [(when(a.at), render("{} <small>{}</small>", a.user, a.role), a.action, a.target or "—",
             badge(a.outcome, "ok" if a.outcome == "done" else "bad" if a.outcome.startswith("refused") else "muted"),
             a.address or "—") for a in actions]
    return table(("When", "Who", "Action", "Target", "Outcome", "From"), rows, empty="Nothing was done here yet.",
                 cols=("nowrap",))
