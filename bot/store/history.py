"""Sessions, their messages and summaries, usage, charges and traces (the ``Store`` port's
history half and ``CompactingStore``'s summaries), written once for both stores.

A turn is one transaction: its messages, usage, charges, answer, settled inbound rows and trace,
then the writes of whoever started it (``Turn.also``); on PostgreSQL its own rows are one
statement (``one_statement``: the whole turn, without BEGIN and COMMIT, when it has no ``also``),
which with several instances also checks its lane's lease (the driver's ``_turn_guard``,
``bot.store.pg.history``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from bot.llm import Message, Role, parts_from_json, parts_to_json
from bot.store.answers import INSERT_ANSWER, INSERT_CHUNK, answer_rows
from bot.store.base import Recent, Session, SessionOf, StoredMessage, Summary, Turn, UsageTotals, key_of
from bot.store.engine import Engine
from bot.store.inbound import MARK_ANSWERED, mark_answered
from bot.store.op import Driven, Op, Row, TurnGuard, execute, inserted, many, one, rows, value
from bot.tracing import Span, SpanKind, TraceRecord

log = logging.getLogger(__name__)

CURRENT_SESSION = "SELECT id, key, created_at FROM sessions WHERE key = ? AND archived_at IS NULL"
ARCHIVE_SESSION = "UPDATE sessions SET archived_at = ? WHERE key = ? AND archived_at IS NULL"
NEW_SESSION = ("INSERT INTO sessions (key, created_at) VALUES (?, ?)"
               " ON CONFLICT (key) WHERE archived_at IS NULL DO NOTHING")
_LIVE = "FROM messages WHERE session_id = ? AND compacted = 0"
HISTORY = f"SELECT id, role, parts {_LIVE} ORDER BY id"
HISTORY_LAST = f"SELECT id, role, parts {_LIVE} ORDER BY id DESC LIMIT ?"  # by the partial index messages_live
LIVE_COUNT = f"SELECT COUNT(*) {_LIVE}"
_SUMMARY_COLUMNS = "text, through_id, messages, tokens_before, tokens_after, run_id, created_at"
LAST_SUMMARY = f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE session_id = ? ORDER BY id DESC LIMIT 1"
# what a run starts from in one statement (one round trip, one snapshot): the newest live messages,
# newest first, each with the live count; the latest summary on the first row only (a session
# without live messages: one row of NULLs and the summary)
RECENT = (
    f"SELECT m.id, m.role, m.parts, (SELECT COUNT(*) {_LIVE}), s.text, s.through_id, s.messages, s.tokens_before,"
    f" s.tokens_after, s.run_id, s.created_at FROM (SELECT 1 AS one) o"
    f" LEFT JOIN ({HISTORY_LAST}) m ON 1 = 1"
    f" LEFT JOIN ({LAST_SUMMARY}) s ON m.id IS NULL OR m.id = (SELECT MAX(id) {_LIVE})"
    " ORDER BY m.id DESC"
)
LOCK_SESSION = "SELECT id FROM sessions WHERE id = ?"  # with the engine's FOR UPDATE
SUMMARY_THROUGH = "SELECT MAX(through_id) FROM summaries WHERE session_id = ?"
INSERT_SUMMARY = (
    "INSERT INTO summaries (session_id, run_id, text, through_id, messages, tokens_before, tokens_after, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
MARK_COMPACTED = "UPDATE messages SET compacted = 1 WHERE session_id = ? AND id <= ? AND compacted = 0"
INSERT_MESSAGE = "INSERT INTO messages (session_id, run_id, seq, role, parts, created_at) VALUES (?, ?, ?, ?, ?, ?)"
INSERT_USAGE = (
    "INSERT INTO usage (session_id, run_id, model, input_tokens, output_tokens, cache_read_tokens,"
    " cache_write_tokens, cost, created_at, person) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_CHARGE = "INSERT INTO charges (person, run_id, tokens, cost, created_at) VALUES (?, ?, ?, ?, ?)"
PERSON_USAGE = (
    "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) FROM charges WHERE person = ? AND created_at >= ?"
)
BOT_USAGE = "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost), 0.0) FROM charges WHERE created_at >= ?"
USAGE_TOTALS = (  # a title's model call is no turn
    "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
    " COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0), COALESCE(SUM(cost), 0.0),"
    " COALESCE(SUM(CASE WHEN run_id NOT LIKE '%-title' THEN 1 ELSE 0 END), 0) FROM usage WHERE session_id = ?"
)
_TRACE_COLUMNS = (
    "run_id, session_key, agent_id, started_at, ended_at, status, model, input_tokens, output_tokens, cost,"
    " iterations, error, cache_read_tokens, cache_write_tokens, model_why"
)
_TRACE_VALUES = ", ".join(f"{c.strip()} = excluded.{c.strip()}" for c in _TRACE_COLUMNS.split(",")[1:])
INSERT_TRACE = (f"INSERT INTO traces ({_TRACE_COLUMNS}) VALUES ({', '.join('?' * 15)})"
                f" ON CONFLICT (run_id) DO UPDATE SET {_TRACE_VALUES}")
_SPAN_COLUMNS = ("run_id, kind, name, started_at, duration_ms, input_tokens, output_tokens, cost, is_error, preview,"
                 " cache_read_tokens, cache_write_tokens")
INSERT_SPAN = f"INSERT INTO spans ({_SPAN_COLUMNS}) VALUES ({', '.join('?' * 12)})"
LAST_TRACES = f"SELECT {_TRACE_COLUMNS} FROM traces ORDER BY started_at DESC LIMIT ?"
LAST_SESSION_TRACES = f"SELECT {_TRACE_COLUMNS} FROM traces WHERE session_key = ? ORDER BY started_at DESC LIMIT ?"
TRACE = f"SELECT {_TRACE_COLUMNS} FROM traces WHERE run_id = ?"
_SPANS = f"SELECT {_SPAN_COLUMNS} FROM spans WHERE {{runs}} ORDER BY id"
_RUNS_AT_ONCE = 500  # traces whose spans one statement reads


def new_session(key: str, fresh: bool, now: float) -> Op[tuple[Session, bool]]:
    """The key's current session, made now (True) unless another caller made it meanwhile (False);
    ``fresh`` archives the current one first."""
    if fresh:
        yield from execute(ARCHIVE_SESSION, now, key)
    made = yield from inserted(NEW_SESSION, key, now)
    if made is None:
        found = yield from one(CURRENT_SESSION, key)
        assert found is not None
        return Session(*found), False
    return Session(made, key, now), True


def recent(session: Session, limit: int) -> Op[Recent]:
    sid = session.id
    found = yield from rows(RECENT, sid, sid, limit, sid, sid)
    first = found[0]
    summary = None if first[4] is None else Summary(*first[4:])
    messages = [] if first[0] is None else [Message(Role(r[1]), parts_from_json(r[2])) for r in reversed(found)]
    return Recent(summary, messages, int(first[3]))


def save_summary(d: Engine, session: Session, s: Summary, now: float) -> Op[bool]:
    if d.for_update:  # one compaction of a session at a time (SQLite's writers take turns anyway)
        yield from execute(LOCK_SESSION + d.for_update, session.id)
    done = yield from value(SUMMARY_THROUGH, session.id)
    if done is not None and done >= s.through_id:
        return False
    yield from execute(INSERT_SUMMARY, session.id, s.run_id, s.text, s.through_id, s.messages, s.tokens_before,
                       s.tokens_after, s.created_at or now)
    yield from execute(MARK_COMPACTED, session.id, s.through_id)
    return True


# the SQL types of each table's columns a turn writes, in order: one array per column (``Engine.values``)
_TYPES = {
    INSERT_MESSAGE: ("bigint", "text", "bigint", "text", "text", "float8"),
    INSERT_USAGE: ("bigint", "text", "text", "bigint", "bigint", "bigint", "bigint", "float8", "float8", "text"),
    INSERT_CHARGE: ("text", "text", "bigint", "float8", "float8"),
    INSERT_ANSWER: ("text", "text", "text", "text", "text", "bigint", "float8"),
    INSERT_CHUNK: ("text", "bigint", "text", "text", "bytea", "text", "bigint"),
    INSERT_TRACE: ("text", "text", "text", "float8", "float8", "text", "text", "bigint", "bigint", "float8", "bigint",
                   "text", "bigint", "bigint", "text"),
    INSERT_SPAN: ("text", "text", "text", "float8", "float8", "bigint", "bigint", "float8", "bigint", "text", "bigint",
                  "bigint"),
}


def _into(insert: str) -> tuple[str, str]:
    """``INSERT INTO t (columns) VALUES (...) [ON CONFLICT ...]`` -> (``INSERT INTO t (columns)``, its tail)."""
    head, rest = insert.split(" VALUES ", 1)
    return head, rest.split(")", 1)[1]


def turn_rows(turn: Turn, now: float) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """What a turn inserts (but its settled messages and its ``also``): (INSERT of one row, rows)
    per table, in the order a foreign key needs (an answer before its chunks, a trace before its spans)."""
    sid, run_id = turn.session.id, turn.run_id
    u = turn.usage
    parts: list[tuple[str, list[tuple[Any, ...]]]] = [
        (INSERT_MESSAGE, [(sid, run_id, seq, str(m.role), parts_to_json(m.parts), now)
                          for seq, m in enumerate(turn.messages)]),
        (INSERT_USAGE, [(sid, run_id, turn.model, u.input_tokens, u.output_tokens, u.cache_read_tokens,
                         u.cache_write_tokens, turn.cost, now, None)]),
        (INSERT_CHARGE, [(c.person, run_id, c.tokens, c.cost, now) for c in turn.charges]),
    ]
    if turn.answer is not None:
        row, chunks = answer_rows(turn.answer)
        parts += [(INSERT_ANSWER, [row]), (INSERT_CHUNK, chunks)]
    if (t := turn.trace) is not None:
        parts += [
            (INSERT_TRACE, [(t.run_id, t.session_key, t.agent_id, t.started_at, t.ended_at, t.status, t.model,
                             t.input_tokens, t.output_tokens, t.cost, t.iterations, t.error, t.cache_read_tokens,
                             t.cache_write_tokens, t.why)]),
            (INSERT_SPAN, [(t.run_id, str(s.kind), s.name, s.started_at, s.duration_ms, s.input_tokens,
                            s.output_tokens, s.cost, int(s.is_error), s.preview, s.cache_read_tokens,
                            s.cache_write_tokens) for s in t.spans]),
        ]
    return [(sql, found) for sql, found in parts if found]


def one_statement(d: Engine, turn: Turn, now: float, guard: TurnGuard | None) -> tuple[str, tuple[Any, ...]]:
    """A turn's rows (and its settled messages) as one statement of data-modifying WITH parts
    (``d.with_writes``): one round trip, atomic without BEGIN and COMMIT. With ``guard``, its parts
    come first, every write is made only if its ``held`` part has a row, and the statement selects
    its ``result``. The text depends only on which parts the turn has: few statements are prepared."""
    cond = f" WHERE EXISTS (SELECT 1 FROM {guard.held})" if guard is not None else ""
    parts: list[str] = []
    args: list[Any] = list(guard.args) if guard is not None else []
    for sql, found in turn_rows(turn, now):
        head, tail = _into(sql)
        source, values = d.values(_TYPES[sql], found)
        parts.append(f"{head} {source}{cond}{tail}")
        args += values
    if turn.settle and turn.inbound_ids:
        where, ids = d.any_of("id", turn.inbound_ids, "bigint")
        parts.append(MARK_ANSWERED.format(ids=where) + cond.replace(" WHERE ", " AND "))
        args += [now, *ids]
    if guard is not None:
        body = ", ".join([guard.parts, *(f"w{i} AS ({part})" for i, part in enumerate(parts))])
        return f"WITH {body} SELECT {guard.result}", tuple(args)
    body = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(parts[:-1]))
    return (f"WITH {body} {parts[-1]}" if body else parts[-1]), tuple(args)


def append_turn(d: Engine, turn: Turn, now: float, guard: TurnGuard | None) -> Op[None]:
    together = d.with_writes and not turn.also  # PostgreSQL: the turn and its guard in one statement
    if guard is not None:
        check_only = (f"WITH {guard.parts} SELECT {guard.result}", guard.args)
        sql, args = one_statement(d, turn, now, guard) if together else check_only
        guard.check((yield from rows(sql, *args))[0])  # a SELECT of aggregates: one row
        if together:
            return
    if d.with_writes:
        sql, args = one_statement(d, turn, now, None)
        yield from execute(sql, *args)
    else:
        for sql, rows_ in turn_rows(turn, now):
            yield from many(sql, rows_)
        if turn.settle:
            yield from mark_answered(d, turn.inbound_ids, now)
    for write in turn.also:  # whoever started the turn: what ends with it (never done again after a restart)
        yield from write(now)


def with_spans(d: Engine, trace_rows: list[Row]) -> Op[list[TraceRecord]]:
    """The traces of rows of ``_TRACE_COLUMNS``, in their order, each with its spans."""
    spans: dict[str, list[Span]] = {}
    runs = [row[0] for row in trace_rows]
    for start in range(0, len(runs), _RUNS_AT_ONCE):
        where, args = d.any_of("run_id", runs[start:start + _RUNS_AT_ONCE], "text")
        for r in (yield from rows(_SPANS.format(runs=where), *args)):
            spans.setdefault(r[0], []).append(Span(SpanKind(r[1]), r[2], r[3], r[4], r[5], r[6], r[7], bool(r[8]),
                                                   r[9], r[10], r[11]))
    return [replace(TraceRecord(*row[:12]),  # the columns up to ``error``, in order
                    spans=tuple(spans.get(row[0], ())), cache_read_tokens=row[12], cache_write_tokens=row[13],
                    why=row[14])
            for row in trace_rows]


def traces(d: Engine, session_key: str | None, last: int) -> Op[list[TraceRecord]]:
    found = yield from (rows(LAST_TRACES, last) if session_key is None
                        else rows(LAST_SESSION_TRACES, session_key, last))
    return (yield from with_spans(d, found[::-1]))


def trace(d: Engine, run_id: str) -> Op[TraceRecord | None]:
    found = yield from with_spans(d, (yield from rows(TRACE, run_id)))
    return found[0] if found else None


class HistoryOps(Driven):
    async def session(self, of: SessionOf, *, fresh: bool = False) -> Session:
        key = key_of(of)
        if not fresh:
            found = await self._read(one(CURRENT_SESSION, key))
            if found is not None:
                return Session(*found)
        session, made = await self._write(new_session(key, fresh, time.time()))
        if made:
            log.info("session %s: new session %d%s", key, session.id, " (fresh)" if fresh else "")
        return session

    async def history(self, session: Session) -> list[Message]:
        return [stored.message for stored in await self.live_messages(session)]

    async def live_messages(self, session: Session) -> list[StoredMessage]:
        return [StoredMessage(id_, Message(Role(role), parts_from_json(parts)))
                for id_, role, parts in await self._read(rows(HISTORY, session.id))]

    async def recent(self, session: Session, limit: int) -> Recent:
        return await self._read(recent(session, limit))  # one statement: one snapshot

    async def live_count(self, session: Session) -> int:
        return int(await self._read(value(LIVE_COUNT, session.id)))

    async def summary(self, session: Session) -> Summary | None:
        found = await self._read(one(LAST_SUMMARY, session.id))
        return None if found is None else Summary(*found)

    async def save_summary(self, session: Session, summary: Summary) -> bool:
        saved = await self._write(save_summary(self.engine, session, summary, time.time()))
        log.info("session %s: summary through message %d %s", session.key, summary.through_id,
                 "saved" if saved else "not saved (a later one exists)")
        return saved

    async def append_turn(self, turn: Turn) -> None:
        adds = bool(turn.messages or turn.inbound_ids or turn.answer is not None or turn.also)
        guard = self._turn_guard(turn) if adds else None
        await self._write(append_turn(self.engine, turn, time.time(), guard),
                          alone=self.engine.with_writes and not turn.also)  # one statement
        log.debug("session %s run %s: turn of %d messages stored", turn.session.key, turn.run_id, len(turn.messages))

    async def usage(self, session: Session) -> UsageTotals:
        i, o, cr, cw, cost, turns = (await self._read(rows(USAGE_TOTALS, session.id)))[0]  # an aggregate: one row
        return UsageTotals(int(i), int(o), int(cr), int(cw), float(cost), int(turns))

    async def usage_since(self, person: str, since: float) -> tuple[int, float]:
        tokens, cost = (await self._read(rows(PERSON_USAGE, person, since)))[0]
        return int(tokens), float(cost)

    async def bot_usage_since(self, since: float) -> tuple[int, float]:
        tokens, cost = (await self._read(rows(BOT_USAGE, since)))[0]
        return int(tokens), float(cost)

    async def traces(self, session_key: str | None = None, last: int = 20) -> list[TraceRecord]:
        return await self._read(traces(self.engine, session_key, last))
