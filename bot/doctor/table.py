"""The doctor's report: one row per check (what, result, what was found, what to do)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.channels.checks import Check, Outcome
from bot.tracing import strip_controls

MARK = {Outcome.OK: "ok", Outcome.WARN: "WARN", Outcome.FAIL: "FAIL", Outcome.SKIP: "-"}
MAX_DETAIL = 70


def table(checks: Sequence[Check]) -> str:
    """The checks as aligned columns, then a line that sums them up."""
    rows = [("CHECK", "RESULT", "FOUND", "ADVICE")]
    for c in checks:
        detail = strip_controls(" ".join(c.detail.split()))
        rows.append((c.name, MARK[c.outcome], detail, strip_controls(" ".join(c.advice.split()))))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    widths[2] = min(widths[2], MAX_DETAIL)  # a longer finding pushes only its own advice along
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip() for r in rows]
    failed = sum(c.failed for c in checks)
    warned = sum(c.outcome is Outcome.WARN for c in checks)
    lines.append("")
    lines.append(f"{failed} failed, {warned} warning{'s' if warned != 1 else ''}, "
                 f"{sum(c.outcome is Outcome.OK for c in checks)} ok" if failed or warned else
                 f"all {len(checks)} checks passed" if checks else "nothing checked")
    return "\n".join(lines)
