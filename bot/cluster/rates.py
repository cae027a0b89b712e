"""Per-person message rates shared by every instance: one token bucket row per person, refilled
and taken from in one statement (so two instances taking at once never both get the last one)."""

from __future__ import annotations

from bot.store.pg.base import Db
from bot.store.pg.sql import NOW

_LEVEL = "least($2, b.tokens + (excluded.refilled - b.refilled) * $3)"
_TAKE = (
    f"INSERT INTO cluster_buckets AS b (person, tokens, refilled, taken) VALUES ($1, $2 - 1, {NOW}, true)"
    f" ON CONFLICT (person) DO UPDATE SET tokens = CASE WHEN {_LEVEL} >= 1 THEN {_LEVEL} - 1 ELSE {_LEVEL} END,"
    f" taken = {_LEVEL} >= 1, refilled = excluded.refilled RETURNING tokens, taken"
)


async def take(db: Db, person: str, capacity: float, per_second: float) -> float:
    """Take one token of ``person``'s bucket; 0.0 when taken, else the part of a token missing."""
    row = await db.fetchrow(_TAKE, person, capacity, per_second)
    assert row is not None
    return 0.0 if row["taken"] else 1.0 - float(row["tokens"])
