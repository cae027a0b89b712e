"""The dashboard's reads and its audit trail (of the rows in ``bot.store.reports``), written
once for both stores and run on the one store as a capability's operations
(``bot.store.steps``): ``Reads`` is everything the dashboard asks of it.

A page is one read (``bot.store.op``), whose several statements see one moment (on PostgreSQL
a read-only REPEATABLE READ transaction, so that a log and its count agree). What the two
engines spell differently comes from the ``Engine``: reading a JSON field,
case-insensitive ``LIKE`` and the whole days since an instant.

The queries look only at the newest ``RECENT_INBOUND`` inbound rows for names (people's names
live in the stored message payloads): a page never scans a log of millions. A payload whose
JSON holds an escaped surrogate (an emoji, or a lone one from a broken client) or NUL is read
in Python rather than by the SQL: neither PostgreSQL's ``json`` (which refuses the whole
statement) nor SQLite's ``json_extract`` (which returns invalid UTF-8) reads them all.
"""

from __future__ import annotations

import json
from typing import Any

from bot.llm import Message, Role, parts_from_json
from bot.messages import Answer
from bot.store.base import ApprovedSender, AppStore, PairingCode, Summary
from bot.store.engine import Engine
from bot.store.history import trace
from bot.store.op import Op, Row, execute, rows
from bot.store.reports import (
    AuditEntry,
    DailyUsage,
    Failure,
    LoggedMessage,
    SessionLog,
    SessionSummary,
    UsageReport,
)
from bot.tracing import TraceRecord

RECENT_INBOUND = 20_000  # inbound rows (newest) read for the names of senders
TITLE_CHARS = 400  # of a session's first user message, as stored (the page shortens it)
DAY = 86400.0

def _sender_names(d: Engine) -> str:
    """Each inbound row's sender as ``platform:id`` and their name (oldest first)."""
    return (
        f"SELECT {d.read_field('payload', 'platform')} || ':' || {d.read_field('payload', 'sender', 'id')},"
        f" {d.read_field('payload', 'sender', 'name')}, {d.unread('payload')} FROM inbound"
        " WHERE payload != '' AND id > (SELECT COALESCE(MAX(id), 0) FROM inbound) - ? ORDER BY id"
    )


def _names_sql(d: Engine) -> str:
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


def _sessions_sql(d: Engine) -> str:
    return f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.key NOT {d.like} '%:sub:%'"


def _daily_sql(d: Engine) -> str:
    days = d.whole_days.format(seconds="(created_at - ?) / 86400")
    return (f"SELECT person, {days}, SUM(tokens), SUM(cost) FROM charges WHERE created_at >= ?"
            " GROUP BY 1, 2 ORDER BY 1, 2")


def _given_up_sql(d: Engine) -> str:
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


def _names(d: Engine) -> Op[dict[str, tuple[str, str]]]:
    """Session key -> (the last sender's name, their text), from the newest inbound rows."""
    names = {}
    for key, name, text, raw in (yield from rows(_names_sql(d), RECENT_INBOUND)):
        if raw is not None:
            doc = _loads(raw)
            name, text = _field(doc, "sender", "name"), _field(doc, "text")
        names[key] = (name or "", text or "")
    return names


def read_sessions(d: Engine, search: str, limit: int) -> Op[list[SessionSummary]]:
    names = yield from _names(d)
    search = search.strip()
    if not search:
        found = yield from rows(f"{_sessions_sql(d)} {_NEWEST}", limit)
        return [_summary(row, names) for row in found]
    wanted = search.casefold()
    keys = [key for key, (name, _) in names.items() if wanted in name.casefold()]
    marks = ",".join("?" * len(keys))
    by_name = f" OR s.key IN ({marks})" if keys else ""
    text_match = f"EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.parts {d.like} ? ESCAPE '\\')"
    query = f"{_sessions_sql(d)} AND (s.key {d.like} ? ESCAPE '\\' OR {text_match}{by_name}) {_NEWEST}"
    found = yield from rows(query, like(search), like(search), *keys, limit)
    return [_summary(row, names) for row in found]


def read_session_log(d: Engine, session_id: int, limit: int) -> Op[SessionLog | None]:
    head = yield from rows(_SESSION, session_id)
    if not head:
        return None
    names = yield from _names(d)
    logged = (yield from rows(_LOG, session_id, limit))[::-1]
    total = int((yield from rows(_COUNT, session_id))[0][0])
    messages = [LoggedMessage(id_, run_id, Message(Role(role), parts_from_json(parts)), created, bool(compacted))
                for id_, run_id, role, parts, created, compacted in logged]
    summaries = [Summary(*row) for row in (yield from rows(_SUMMARIES, session_id))]
    return SessionLog(_summary(head[0], names), messages, summaries, total - len(messages))


def read_daily_usage(d: Engine, since: float) -> Op[UsageReport]:
    days = [DailyUsage(person, since + int(n) * DAY, int(tokens), float(cost))
            for person, n, tokens, cost in (yield from rows(_daily_sql(d), since, since))]
    names: dict[str, str] = {}
    for person, name, raw in (yield from rows(_sender_names(d), RECENT_INBOUND)):
        if raw is not None:
            doc = _loads(raw)
            platform, sender, name = _field(doc, "platform"), _field(doc, "sender", "id"), _field(doc, "sender", "name")
            person = f"{platform}:{sender}" if platform is not None and sender is not None else None
        if person and name:
            names[person] = name  # oldest first: the newest name wins
    for person, name in (yield from rows(_APPROVED_NAMES)):
        names.setdefault(person, name)
    return UsageReport(days, names)


def read_failures(d: Engine, limit: int) -> Op[list[Failure]]:
    found = [Failure(at, "run", key, error, run_id)
             for at, key, error, run_id in (yield from rows(_FAILED_RUNS, limit))]
    for at, platform, chat_id, answer_id, unsent in (yield from rows(_given_up_sql(d), limit)):
        found.append(Failure(at or 0.0, "delivery", f"{platform}:{chat_id}",
                             f"answer {answer_id} given up with {unsent} part{'s' if unsent != 1 else ''} unsent"))
    found.sort(key=lambda f: f.at, reverse=True)
    return found[:limit]


def read_actions(limit: int) -> Op[list[AuditEntry]]:
    return [AuditEntry(*row) for row in (yield from rows(ACTIONS, limit))]


def action_row(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.at, entry.user, entry.role, entry.action, entry.target, entry.outcome, entry.address)


class Reads:
    """What the dashboard asks of the store: its pages' reads (each one read, seeing one moment),
    its audit trail, and what it shows and changes of the core's (pairing, traces, answers owed)."""

    def __init__(self, store: AppStore) -> None:
        self._store = store

    async def sessions(self, search: str = "", limit: int = 100) -> list[SessionSummary]:
        """Sessions by last activity, newest first (sub-agents' left out); ``search`` matches the
        session key, the last sender's name or any message's text (case-insensitive for ASCII)."""
        return await self._store.read(read_sessions(self._store.engine, search, limit), snapshot=True)

    async def session_log(self, session_id: int, limit: int = 500) -> SessionLog | None:
        """The session with its last ``limit`` messages and all its summaries; None when unknown."""
        return await self._store.read(read_session_log(self._store.engine, session_id, limit), snapshot=True)

    async def trace(self, run_id: str) -> TraceRecord | None:
        return await self._store.read(trace(self._store.engine, run_id))

    async def daily_usage(self, since: float) -> UsageReport:
        """Tokens and cost charged per person and UTC day since ``since`` (epoch seconds)."""
        return await self._store.read(read_daily_usage(self._store.engine, since), snapshot=True)

    async def failures(self, limit: int = 20) -> list[Failure]:
        """The newest failed runs and given-up answers, newest first."""
        return await self._store.read(read_failures(self._store.engine, limit), snapshot=True)

    async def record_action(self, entry: AuditEntry) -> None:
        await self._store.write(execute(INSERT_ACTION, *action_row(entry)))

    async def actions(self, limit: int = 50) -> list[AuditEntry]:
        """The newest entries first."""
        return await self._store.read(read_actions(limit), snapshot=True)

    # the core's, as they are

    async def traces(self, session_key: str | None = None, last: int = 20) -> list[TraceRecord]:
        return await self._store.traces(session_key, last)

    async def undelivered(self) -> list[Answer]:
        return await self._store.undelivered()

    async def pending_pairings(self, now: float) -> list[PairingCode]:
        return await self._store.pending_pairings(now)

    async def approve_pairing(self, code: str, now: float) -> PairingCode | None:
        return await self._store.approve_pairing(code, now)

    async def deny_pairing(self, code: str, now: float) -> PairingCode | None:
        return await self._store.deny_pairing(code, now)

    async def approved_senders(self, platform: str | None = None) -> list[ApprovedSender]:
        return await self._store.approved_senders(platform)
