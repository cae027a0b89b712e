"""The dashboard's own table (its spec's migrations) and its operations, written once for both
drivers: each instance's live board as it last published it (``bot.dashboard.elsewhere``;
used with several instances on PostgreSQL, created everywhere)."""

from __future__ import annotations

from bot.store.op import Op, execute, rows
from bot.store.schema_steps import Migration

MIGRATIONS = (Migration("dashboard/0001_boards", """
    -- each instance's live board as it last published it (several instances on PostgreSQL)
    CREATE TABLE dashboard_boards (
        instance     TEXT PRIMARY KEY,
        runs         TEXT NOT NULL,  -- JSON: its rows (bot.dashboard.live.LiveRun)
        published_at {real} NOT NULL
    );
"""),)

def publish(instance: str, runs: str, now: float) -> Op[None]:
    yield from execute("INSERT INTO dashboard_boards (instance, runs, published_at) VALUES (?, ?, ?)"
                       " ON CONFLICT (instance) DO UPDATE SET runs = excluded.runs,"
                       " published_at = excluded.published_at", instance, runs, now)


def boards(instances: tuple[str, ...]) -> Op[list[tuple[str, str]]]:
    if not instances:
        return []
    marks = ", ".join("?" * len(instances))
    found = yield from rows(f"SELECT instance, runs FROM dashboard_boards WHERE instance IN ({marks})", *instances)
    return [(str(r[0]), str(r[1])) for r in found]
