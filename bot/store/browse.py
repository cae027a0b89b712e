"""The dashboard's reads and its audit trail in SQL: statements and row mappings.

Each function takes the ``sqlite3`` connection and runs on the store's thread as one read
(``SQLiteStore._run``), so a page costs one hop to that thread. The queries look only at the
newest ``RECENT_INBOUND`` inbound rows for names (people's names live in the stored message
payloads): a page never scans a log of millions.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from bot.llm import Message, Role, parts_from_json
from bot.store.base import (
    AuditEntry,
    DailyUsage,
    Failure,
    LoggedMessage,
    SessionLog,
    SessionSummary,
    Summary,
    UsageReport,
)

RECENT_INBOUND = 20_000  # inbound rows (newest) read for the names of senders
TITLE_CHARS = 400  # of a session's first user message, as stored (the page shortens it)
DAY = 86400.0

# the last sender's name and text per session key, among the newest inbound rows
_NAMES = (
    "SELECT session_key, json_extract(payload, '$.sender.name'), json_extract(payload, '$.text') FROM inbound"
    " WHERE context = 0 AND id IN"
    " (SELECT MAX(id) FROM inbound WHERE payload != '' AND id > (SELECT COALESCE(MAX(id), 0) FROM inbound) - ?"
    " GROUP BY session_key)"
)
_SESSION_COLUMNS = (
    "s.id, s.key, s.created_at, s.archived_at IS NOT NULL,"
    " COALESCE((SELECT created_at FROM messages m WHERE m.session_id = s.id ORDER BY m.id DESC LIMIT 1),"
    " s.created_at),"
    " (SELECT parts FROM messages m WHERE m.session_id = s.id AND m.role = 'user' ORDER BY m.id LIMIT 1),"
    " (SELECT COALESCE(SUM(input_tokens), 0) FROM usage WHERE session_id = s.id),"
    " (SELECT COALESCE(SUM(output_tokens), 0) FROM usage WHERE session_id = s.id),"
    " (SELECT COALESCE(SUM(cost), 0.0) FROM usage WHERE session_id = s.id),"
    " (SELECT COUNT(*) FROM usage WHERE session_id = s.id)"
)
_SESSIONS = f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.key NOT LIKE '%:sub:%'"
_SESSION = f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.id = ?"
_TEXT_MATCH = "EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.parts LIKE ? ESCAPE '\\')"
_LOG = (
    "SELECT id, run_id, role, parts, created_at, compacted FROM messages WHERE session_id = ?"
    " ORDER BY id DESC LIMIT ?"
)
_COUNT = "SELECT COUNT(*) FROM messages WHERE session_id = ?"
_SUMMARIES = (
    "SELECT text, through_id, messages, tokens_before, tokens_after, run_id, created_at FROM summaries"
    " WHERE session_id = ? ORDER BY id"
)
_DAILY = (
    "SELECT person, CAST((created_at - ?) / 86400 AS INTEGER), SUM(tokens), SUM(cost) FROM charges"
    " WHERE created_at >= ? GROUP BY 1, 2 ORDER BY 1, 2"
)
_SENDER_NAMES = (
    "SELECT json_extract(payload, '$.platform') || ':' || json_extract(payload, '$.sender.id'),"
    " json_extract(payload, '$.sender.name') FROM inbound"
    " WHERE payload != '' AND id > (SELECT COALESCE(MAX(id), 0) FROM inbound) - ? ORDER BY id"
)
_APPROVED_NAMES = "SELECT platform || ':' || user_id, name FROM approved_senders"
_FAILED_RUNS = (
    "SELECT ended_at, session_key, COALESCE(error, ''), run_id FROM traces WHERE status = 'failed'"
    " ORDER BY started_at DESC LIMIT ?"
)
_GIVEN_UP = (
    "SELECT delivered_at, platform, json_extract(target, '$.chat_id'), id,"
    " (SELECT COUNT(*) FROM chunks c WHERE c.answer_id = a.id AND c.sent_at IS NULL)"
    " FROM answers a WHERE given_up = 1 ORDER BY delivered_at DESC LIMIT ?"
)
INSERT_ACTION = (
    "INSERT INTO dashboard_actions (at, user, role, action, target, outcome, address) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
ACTIONS = (
    "SELECT at, user, role, action, target, outcome, address FROM dashboard_actions ORDER BY id DESC LIMIT ?"
)


def like(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere (``%``, ``_`` and ``\\`` taken literally)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _title(parts: str | None) -> str:
    if not parts:
        return ""
    return Message(Role.USER, parts_from_json(parts)).text.strip()[:TITLE_CHARS]


def _summary(row: tuple[Any, ...], recent: dict[str, tuple[str, str]]) -> SessionSummary:
    """A session row; before its first turn is stored, its title is the text waiting for it."""
    id_, key, created, archived, last, first, i, o, cost, turns = row
    name, text = recent.get(key, ("", ""))
    return SessionSummary(id_, key, created, bool(archived), last, _title(first) or text[:TITLE_CHARS], name,
                          int(i), int(o), float(cost), int(turns))


def _names(db: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    """Session key -> (the last sender's name, their text), from the newest inbound rows."""
    return {key: (name or "", text or "") for key, name, text in db.execute(_NAMES, (RECENT_INBOUND,))}


def sessions(db: sqlite3.Connection, search: str, limit: int) -> list[SessionSummary]:
    names = _names(db)
    search = search.strip()
    if not search:
        rows = db.execute(f"{_SESSIONS} ORDER BY 5 DESC LIMIT ?", (limit,)).fetchall()
        return [_summary(row, names) for row in rows]
    wanted = search.casefold()
    keys = [key for key, (name, _) in names.items() if wanted in name.casefold()]
    marks = ",".join("?" * len(keys))
    by_name = f" OR s.key IN ({marks})" if keys else ""
    query = f"{_SESSIONS} AND (s.key LIKE ? ESCAPE '\\' OR {_TEXT_MATCH}{by_name}) ORDER BY 5 DESC LIMIT ?"
    rows = db.execute(query, (like(search), like(search), *keys, limit)).fetchall()
    return [_summary(row, names) for row in rows]


def session_log(db: sqlite3.Connection, session_id: int, limit: int) -> SessionLog | None:
    head = db.execute(_SESSION, (session_id,)).fetchall()
    if not head:
        return None
    names = _names(db)
    rows = db.execute(_LOG, (session_id, limit)).fetchall()
    rows.reverse()
    total = int(db.execute(_COUNT, (session_id,)).fetchone()[0])
    messages = [LoggedMessage(id_, run_id, Message(Role(role), parts_from_json(parts)), created, bool(compacted))
                for id_, run_id, role, parts, created, compacted in rows]
    summaries = [Summary(*row) for row in db.execute(_SUMMARIES, (session_id,))]
    return SessionLog(_summary(head[0], names), messages, summaries, total - len(messages))


def daily_usage(db: sqlite3.Connection, since: float) -> UsageReport:
    days = [DailyUsage(person, since + n * DAY, int(tokens), float(cost))
            for person, n, tokens, cost in db.execute(_DAILY, (since, since))]
    names: dict[str, str] = {}
    for person, name in db.execute(_SENDER_NAMES, (RECENT_INBOUND,)):
        if person and name:
            names[person] = name  # oldest first: the newest name wins
    for person, name in db.execute(_APPROVED_NAMES):
        names.setdefault(person, name)
    return UsageReport(days, names)


def failures(db: sqlite3.Connection, limit: int) -> list[Failure]:
    found = [Failure(at, "run", key, error, run_id) for at, key, error, run_id in db.execute(_FAILED_RUNS, (limit,))]
    for at, platform, chat_id, answer_id, unsent in db.execute(_GIVEN_UP, (limit,)):
        found.append(Failure(at or 0.0, "delivery", f"{platform}:{chat_id}",
                             f"answer {answer_id} given up with {unsent} part{'s' if unsent != 1 else ''} unsent"))
    found.sort(key=lambda f: f.at, reverse=True)
    return found[:limit]


def action_row(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.at, entry.user, entry.role, entry.action, entry.target, entry.outcome, entry.address)


def actions(db: sqlite3.Connection, limit: int) -> list[AuditEntry]:
    return [AuditEntry(*row) for row in db.execute(ACTIONS, (limit,))]
