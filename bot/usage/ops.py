"""The usage capability's database operations, written once for both drivers: what was charged
(the core's ``charges`` table) and the alerts already given (its own ``usage_alerts``)."""

from __future__ import annotations

from bot.store.op import Op, count, one, value
from bot.store.schema_steps import Migration
from bot.usage.report import Spent

MIGRATIONS = (Migration("usage/0001_alerts", """
    -- the budget alerts given: one per subject (a person) and UTC day, whichever instance gave it
    CREATE TABLE usage_alerts (
        day      TEXT NOT NULL,  -- YYYY-MM-DD, UTC
        subject  TEXT NOT NULL,  -- the person (platform:user_id, person:<name>)
        budget   TEXT NOT NULL,  -- tokens | cost
        given_at {real} NOT NULL,
        PRIMARY KEY (day, subject)
    );
"""),)


def spent(person: str | None, since: float) -> Op[Spent]:
    """Tokens and cost charged to ``person`` (None: to everyone) since ``since``."""
    where = "created_at >= ?" + (" AND person = ?" if person is not None else "")
    args = (since, person) if person is not None else (since,)
    row = yield from one(f"SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) FROM charges WHERE {where}",
                         *args)
    return Spent(int(row[0]), float(row[1])) if row is not None else Spent()


def claim_alert(day: str, subject: str, budget: str, now: float) -> Op[bool]:
    """Record the alert of ``subject`` for ``day``; False when it was given already."""
    done = yield from count("INSERT INTO usage_alerts (day, subject, budget, given_at) VALUES (?, ?, ?, ?)"
                            " ON CONFLICT (day, subject) DO NOTHING", day, subject, budget, now)
    return done == 1


def dm_chat(platform: str, session_key: str) -> Op[str | None]:
    """The chat of the latest message in a person's DM session (a Discord DM is a channel of its own)."""
    found = yield from value("SELECT chat_id FROM inbound WHERE platform = ? AND session_key = ? "
                             "ORDER BY id DESC LIMIT 1", platform, session_key)
    return str(found) if found is not None else None
