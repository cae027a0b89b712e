"""The scenarios of ``python -m bench``, in the order they run. Each module has ``NAME``,
``HOW`` (how it measures, printed under the table) and ``async def run(quick) -> list[Figure]``."""

from __future__ import annotations

from bench.scenarios import (
    api,
    cluster,
    dashboard,
    delivery,
    footprint,
    history,
    mcp,
    observability,
    on_discord,
    on_slack,
    overhead,
    scale,
    schedules,
    startup,
    stop,
    streaming,
    throughput,
    tokens,
)

SCENARIOS = {m.NAME: m for m in (overhead, throughput, streaming, stop, scale, history, tokens, startup, footprint,
                                 delivery, on_discord, on_slack, schedules, mcp, dashboard, cluster, observability,
                                 api)}
