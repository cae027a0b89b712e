"""The dashboard's reads and its audit trail in SQL: statements and row mappings, for both stores.

Each read is written once, as a generator that yields ``(statement, arguments)`` and is sent
back the rows (tuples); a store runs it with its own driver: ``run`` on the SQLite store's
thread (one hop per page, ``SQLiteStore._run``), ``bot.store.pg.browse`` on a pooled
PostgreSQL connection. The statements use ``?`` placeholders, and the few things the two
dialects spell differently come from a ``Dialect`` (``SQLITE``, ``POSTGRES``): reading a JSON
field, case-insensitive ``LIKE`` and the whole days since an instant.

The queries look only at the newest ``RECENT_INBOUND`` inbound rows for names (people's names
live in the stored message payloads): a page never scans a log of millions. A payload whose
JSON holds an escaped surrogate (an emoji, or a lone one from a broken client) or NUL is read
in Python rather than by the SQL: neither PostgreSQL's ``json`` (which refuses the whole
statement) nor SQLite's ``json_extract`` (which returns invalid UTF-8) reads them all.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

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

T = TypeVar("T")
Row = tuple[Any, ...]
Query = tuple[str, tuple[Any, ...]]
Read = Generator[Query, list[Row], T]  # yields a statement and its arguments, is sent their rows


@dataclass(frozen=True, slots=True)
class Dialect:
    """What SQLite and PostgreSQL spell differently in these reads."""

    like: str  # case-insensitive LIKE: SQLite's LIKE is (for ASCII), PostgreSQL's is ILIKE
    json_field: str  # a JSON text ``{column}``'s field at ``{path}``, as text
    path: tuple[str, str, str]  # a field's path: its start, the separator of names, its end
    plain: str  # ``{column}`` holds no escaped surrogate or NUL, so the SQL may read its fields
    whole_days: str  # the whole days in ``{seconds}`` (never negative here)

    def field(self, column: str, *names: str) -> str:
        """``column``'s JSON field at ``names`` (nested), as text."""
        start, sep, end = self.path
        return self.json_field.format(column=column, path=start + sep.join(names) + end)

    def read_field(self, column: str, *names: str) -> str:
        """The field, or NULL when the SQL cannot read the payload (``unread`` then holds it)."""
        return f"CASE WHEN {self.plain.format(column=column)} THEN {self.field(column, *names)} END"

    def unread(self, column: str) -> str:
        """The JSON text when the SQL cannot read its fields (for Python to read), else NULL."""
        return f"CASE WHEN NOT {self.plain.format(column=column)} THEN {column} END"


SQLITE = Dialect(
    like="LIKE",
    json_field="json_extract({column}, {path})",
    path=("'$.", ".", "'"),
    plain="({column} NOT GLOB '*\\u[dD][89a-fA-F]*' AND {column} NOT GLOB '*\\u0000*')",
    whole_days="CAST({seconds} AS INTEGER)",  # truncates: the floor of a positive number
)
POSTGRES = Dialect(
    like="ILIKE",  # case-insensitive beyond ASCII too (as the match on people's names is)
    json_field="({column}::json #>> {path})",
    path=("'{", ",", "}'"),
    plain="({column} !~ '\\\\u(0000|[dD][89a-fA-F])')",  # the regular expression \\u(...): a backslash, u
    whole_days="floor({seconds})::bigint",  # a cast to an integer would round
)


def _sender_names(d: Dialect) -> str:
    """Each inbound row's sender as ``platform:id`` and their name (oldest first)."""
    return (
        f"SELECT {d.read_field('payload', 'platform')} || ':' || {d.read_field('payload', 'sender', 'id')},"
        f" {d.read_field('payload', 'sender', 'name')}, {d.unread('payload')} FROM inbound"
        " WHERE payload != '' AND id > (SELECT COALESCE(MAX(id), 0) FROM inbound) - ? ORDER BY id"
    )


def _names_sql(d: Dialect) -> str:
    """The last sender's name and text per session key, among the newest inbound rows."""
    return (
        f"SELECT session_key, {d.read_field('payload', 'sender', 'name')}, {d.read_field('payload', 'text')},"
        f" {d.unread('payload')} FROM inbound WHERE context = 0 AND id IN"
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
_NEWEST = "ORDER BY 5 DESC, 1 DESC LIMIT ?"  # by last activity (ties: the newer session first)
_SESSION = f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.id = ?"
_LOG = (
    "SELECT id, run_id, role, parts, created_at, compacted FROM messages WHERE session_id = ?"
    " ORDER BY id DESC LIMIT ?"
)
_COUNT = "SELECT COUNT(*) FROM messages WHERE session_id = ?"
_SUMMARIES = (
    "SELECT text, through_id, messages, tokens_before, tokens_after, run_id, created_at FROM summaries"
    " WHERE session_id = ? ORDER BY id"
)
_APPROVED_NAMES = "SELECT platform || ':' || user_id, name FROM approved_senders"
_FAILED_RUNS = (
    "SELECT ended_at, session_key, COALESCE(error, ''), run_id FROM traces WHERE status = 'failed'"
    " ORDER BY started_at DESC LIMIT ?"
)
# "user" quoted: a reserved word in PostgreSQL, an identifier in both
INSERT_ACTION = (
    'INSERT INTO dashboard_actions (at, "user", role, action, target, outcome, address) VALUES (?, ?, ?, ?, ?, ?, ?)'
)
ACTIONS = (
    'SELECT at, "user", role, action, target, outcome, address FROM dashboard_actions ORDER BY id DESC LIMIT ?'
)


def _sessions_sql(d: Dialect) -> str:
    return f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.key NOT {d.like} '%:sub:%'"


def _daily_sql(d: Dialect) -> str:
    days = d.whole_days.format(seconds="(created_at - ?) / 86400")
    return (f"SELECT person, {days}, SUM(tokens), SUM(cost) FROM charges WHERE created_at >= ?"
            " GROUP BY 1, 2 ORDER BY 1, 2")


def _given_up_sql(d: Dialect) -> str:
    # a target is written by the bot (ids only): its JSON is always plain
    return (
        f"SELECT delivered_at, platform, {d.field('target', 'chat_id')}, id,"
        " (SELECT COUNT(*) FROM chunks c WHERE c.answer_id = a.id AND c.sent_at IS NULL)"
        " FROM answers a WHERE given_up = 1 ORDER BY COALESCE(delivered_at, 0) DESC LIMIT ?"
    )


def like(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere (``%``, ``_`` and ``\\`` taken literally)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _field(doc: Any, *names: str) -> str | None:
    """A field of a payload read in Python, as the SQL reads it (text, or None when missing)."""
    for name in names:
        if not isinstance(doc, dict) or name not in doc:
            return None
        doc = doc[name]
    if doc is None:
        return None
    return doc if isinstance(doc, str) else json.dumps(doc)


def _loads(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _title(parts: str | None) -> str:
    if not parts:
        return ""
    return Message(Role.USER, parts_from_json(parts)).text.strip()[:TITLE_CHARS]


def _summary(row: Row, recent: dict[str, tuple[str, str]]) -> SessionSummary:
    """A session row; before its first turn is stored, its title is the text waiting for it."""
    id_, key, created, archived, last, first, i, o, cost, turns = row
    name, text = recent.get(key, ("", ""))
    return SessionSummary(id_, key, created, bool(archived), last, _title(first) or text[:TITLE_CHARS], name,
                          int(i), int(o), float(cost), int(turns))


def _names(d: Dialect) -> Read[dict[str, tuple[str, str]]]:
    """Session key -> (the last sender's name, their text), from the newest inbound rows."""
    names = {}
    for key, name, text, raw in (yield _names_sql(d), (RECENT_INBOUND,)):
        if raw is not None:
            doc = _loads(raw)
            name, text = _field(doc, "sender", "name"), _field(doc, "text")
        names[key] = (name or "", text or "")
    return names


def read_sessions(d: Dialect, search: str, limit: int) -> Read[list[SessionSummary]]:
    names = yield from _names(d)
    search = search.strip()
    if not search:
        rows = yield f"{_sessions_sql(d)} {_NEWEST}", (limit,)
        return [_summary(row, names) for row in rows]
    wanted = search.casefold()
    keys = [key for key, (name, _) in names.items() if wanted in name.casefold()]
    marks = ",".join("?" * len(keys))
    by_name = f" OR s.key IN ({marks})" if keys else ""
    text_match = f"EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.parts {d.like} ? ESCAPE '\\')"
    query = f"{_sessions_sql(d)} AND (s.key {d.like} ? ESCAPE '\\' OR {text_match}{by_name}) {_NEWEST}"
    rows = yield query, (like(search), like(search), *keys, limit)
    return [_summary(row, names) for row in rows]


def read_session_log(d: Dialect, session_id: int, limit: int) -> Read[SessionLog | None]:
    head = yield _SESSION, (session_id,)
    if not head:
        return None
    names = yield from _names(d)
    rows = yield _LOG, (session_id, limit)
    rows.reverse()
    total = int((yield _COUNT, (session_id,))[0][0])
    messages = [LoggedMessage(id_, run_id, Message(Role(role), parts_from_json(parts)), created, bool(compacted))
                for id_, run_id, role, parts, created, compacted in rows]
    summaries = [Summary(*row) for row in (yield _SUMMARIES, (session_id,))]
    return SessionLog(_summary(head[0], names), messages, summaries, total - len(messages))


def read_daily_usage(d: Dialect, since: float) -> Read[UsageReport]:
    days = [DailyUsage(person, since + int(n) * DAY, int(tokens), float(cost))
            for person, n, tokens, cost in (yield _daily_sql(d), (since, since))]
    names: dict[str, str] = {}
    for person, name, raw in (yield _sender_names(d), (RECENT_INBOUND,)):
        if raw is not None:
            doc = _loads(raw)
            platform, sender, name = _field(doc, "platform"), _field(doc, "sender", "id"), _field(doc, "sender", "name")
            person = f"{platform}:{sender}" if platform is not None and sender is not None else None
        if person and name:
            names[person] = name  # oldest first: the newest name wins
    for person, name in (yield _APPROVED_NAMES, ()):
        names.setdefault(person, name)
    return UsageReport(days, names)


def read_failures(d: Dialect, limit: int) -> Read[list[Failure]]:
    found = [Failure(at, "run", key, error, run_id)
             for at, key, error, run_id in (yield _FAILED_RUNS, (limit,))]
    for at, platform, chat_id, answer_id, unsent in (yield _given_up_sql(d), (limit,)):
        found.append(Failure(at or 0.0, "delivery", f"{platform}:{chat_id}",
                             f"answer {answer_id} given up with {unsent} part{'s' if unsent != 1 else ''} unsent"))
    found.sort(key=lambda f: f.at, reverse=True)
    return found[:limit]


def read_actions(limit: int) -> Read[list[AuditEntry]]:
    return [AuditEntry(*row) for row in (yield ACTIONS, (limit,))]


def action_row(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.at, entry.user, entry.role, entry.action, entry.target, entry.outcome, entry.address)


# -- on SQLite: each read on the store's connection, on its thread -------------------------


def run(db: sqlite3.Connection, read: Read[T]) -> T:
    """Drive ``read`` on ``db``: each statement it yields runs, its rows are sent back."""
    try:
        statement, args = next(read)
        while True:
            statement, args = read.send(db.execute(statement, args).fetchall())
    except StopIteration as done:
        return done.value


def sessions(db: sqlite3.Connection, search: str, limit: int) -> list[SessionSummary]:
    return run(db, read_sessions(SQLITE, search, limit))


def session_log(db: sqlite3.Connection, session_id: int, limit: int) -> SessionLog | None:
    return run(db, read_session_log(SQLITE, session_id, limit))


def daily_usage(db: sqlite3.Connection, since: float) -> UsageReport:
    return run(db, read_daily_usage(SQLITE, since))


def failures(db: sqlite3.Connection, limit: int) -> list[Failure]:
    return run(db, read_failures(SQLITE, limit))


def actions(db: sqlite3.Connection, limit: int) -> list[AuditEntry]:
    return run(db, read_actions(limit))
