"""Sessions, their messages and summaries, usage, charges and traces on PostgreSQL."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from bot.llm import Message, Role, parts_from_json, parts_to_json
from bot.store import answers as sql_answers
from bot.store.base import LaneLost, Recent, Session, SessionOf, StoredMessage, Summary, Turn, UsageTotals, key_of
from bot.store.pg.answers import INSERT_ANSWER, INSERT_CHUNK
from bot.store.pg.base import Connection, PgBase, drive
from bot.store.pg.inbound import MARK_ANSWERED
from bot.store.schedules import close
from bot.tracing import Span, SpanKind, TraceRecord

log = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class Fence:
    """What a turn of a session commits under, with several instances: the lease of the session's
    lane, its holder (this instance) and the token it was taken with (None: not held here). The
    commit holds the lease's row meanwhile (``FOR KEY SHARE``: the holder's renewals go on, a
    take-over waits), and the server ends the commit of an instance frozen between two of its
    statements after ``idle_ms``, so that the lease is not held up for ever."""

    lease: str
    holder: str
    token: int | None
    idle_ms: int

_CURRENT_SESSION = "SELECT id, key, created_at FROM sessions WHERE key = $1 AND archived_at IS NULL"
_ARCHIVE_SESSION = "UPDATE sessions SET archived_at = $1 WHERE key = $2 AND archived_at IS NULL"
_NEW_SESSION = ("INSERT INTO sessions (key, created_at) VALUES ($1, $2)"
                " ON CONFLICT (key) WHERE archived_at IS NULL DO NOTHING RETURNING id, key, created_at")
_LIVE = "FROM messages WHERE session_id = $1 AND compacted = 0"
_HISTORY = f"SELECT id, role, parts {_LIVE} ORDER BY id"
_HISTORY_LAST = f"SELECT id, role, parts {_LIVE} ORDER BY id DESC LIMIT $2"
_LIVE_COUNT = f"SELECT count(*) {_LIVE}"
_SUMMARY_COLUMNS = "text, through_id, messages, tokens_before, tokens_after, run_id, created_at"
_LAST_SUMMARY = f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE session_id = $1 ORDER BY id DESC LIMIT 1"
_LOCK_SESSION = "SELECT id FROM sessions WHERE id = $1 FOR UPDATE"
# the lane's lease as it was taken, its row locked until the commit (a take-over waits for the turn, or
# the turn sees the take-over), and a bound on the lock should this instance freeze before it commits
_FENCE = ("SELECT set_config('idle_in_transaction_session_timeout', $4, true) FROM cluster_leases"
          " WHERE name = $1 AND holder = $2 AND token = $3 FOR KEY SHARE")
_SUMMARY_THROUGH = "SELECT max(through_id) FROM summaries WHERE session_id = $1"
_INSERT_SUMMARY = (
    "INSERT INTO summaries (session_id, run_id, text, through_id, messages, tokens_before, tokens_after, created_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)
_MARK_COMPACTED = "UPDATE messages SET compacted = 1 WHERE session_id = $1 AND id <= $2 AND compacted = 0"
_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, run_id, seq, role, parts, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
)
_INSERT_USAGE = (
    "INSERT INTO usage (session_id, run_id, model, input_tokens, output_tokens, cache_read_tokens,"
    " cache_write_tokens, cost, created_at, person) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
)
_INSERT_CHARGE = "INSERT INTO charges (person, run_id, tokens, cost, created_at) VALUES ($1, $2, $3, $4, $5)"
_PERSON_USAGE = ("SELECT coalesce(sum(tokens), 0)::bigint, coalesce(sum(cost), 0.0)::float8 FROM charges"
                 " WHERE person = $1 AND created_at >= $2")
_USAGE_TOTALS = (
    "SELECT coalesce(sum(input_tokens), 0)::bigint, coalesce(sum(output_tokens), 0)::bigint,"
    " coalesce(sum(cache_read_tokens), 0)::bigint, coalesce(sum(cache_write_tokens), 0)::bigint,"
    " coalesce(sum(cost), 0.0)::float8, count(*) FROM usage WHERE session_id = $1"
)
_TRACE_COLUMNS = (
    "run_id, session_key, agent_id, started_at, ended_at, status, model, input_tokens, output_tokens, cost,"
    " iterations, error, cache_read_tokens, cache_write_tokens, model_why"
)
_INSERT_TRACE = (
    f"INSERT INTO traces ({_TRACE_COLUMNS})"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
    " ON CONFLICT (run_id) DO UPDATE SET (session_key, agent_id, started_at, ended_at, status, model, input_tokens,"
    " output_tokens, cost, iterations, error, cache_read_tokens, cache_write_tokens, model_why) ="
    " (excluded.session_key, excluded.agent_id, excluded.started_at, excluded.ended_at, excluded.status,"
    " excluded.model, excluded.input_tokens, excluded.output_tokens, excluded.cost, excluded.iterations,"
    " excluded.error, excluded.cache_read_tokens, excluded.cache_write_tokens, excluded.model_why)"
)
_INSERT_SPAN = (
    "INSERT INTO spans (run_id, kind, name, started_at, duration_ms, input_tokens, output_tokens, cost,"
    " is_error, preview, cache_read_tokens, cache_write_tokens)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
)
_LAST_TRACES = f"SELECT {_TRACE_COLUMNS} FROM traces ORDER BY started_at DESC LIMIT $1"
_LAST_SESSION_TRACES = f"SELECT {_TRACE_COLUMNS} FROM traces WHERE session_key = $1 ORDER BY started_at DESC LIMIT $2"
TRACE = f"SELECT {_TRACE_COLUMNS} FROM traces WHERE run_id = $1"
_SPANS = (
    "SELECT run_id, kind, name, started_at, duration_ms, input_tokens, output_tokens, cost, is_error, preview,"
    " cache_read_tokens, cache_write_tokens FROM spans WHERE run_id = ANY($1::text[]) ORDER BY id"
)


class PgHistory(PgBase):
    _fence: Callable[[str], Fence] | None = None

    def fence_with(self, fence: Callable[[str], Fence]) -> None:
        """Several instances: a turn that adds to a conversation (messages, an answer, settled
        messages, a closed occurrence) commits only while ``fence(session key)`` names the lease
        this instance still holds, unchanged (``bot.cluster.Cluster.fence``); else ``append_turn``
        rolls it back and raises ``LaneLost``."""
        self._fence = fence

    async def session(self, of: SessionOf, *, fresh: bool = False) -> Session:
        key = key_of(of)
        if not fresh:
            row = await self.pool.fetchrow(_CURRENT_SESSION, key)
            if row is not None:
                return Session(*row)

        async def create(conn: Connection) -> Session:
            now = time.time()
            if fresh:
                await conn.execute(_ARCHIVE_SESSION, now, key)
            row = await conn.fetchrow(_NEW_SESSION, key, now)
            if row is None:  # another caller made it meanwhile
                row = await conn.fetchrow(_CURRENT_SESSION, key)
                assert row is not None
                return Session(*row)
            log.info("session %s: new session %d%s", key, row["id"], " (fresh)" if fresh else "")
            return Session(*row)

        return await self._transact(create)

    async def history(self, session: Session, limit: int | None = None) -> list[Message]:
        return [Message(Role(r["role"]), parts_from_json(r["parts"])) for r in await self._live(session, limit)]

    async def live_messages(self, session: Session, limit: int | None = None) -> list[StoredMessage]:
        return [StoredMessage(r["id"], Message(Role(r["role"]), parts_from_json(r["parts"])))
                for r in await self._live(session, limit)]

    async def recent(self, session: Session, limit: int) -> Recent:
        async def read(conn: Connection) -> Recent:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                summary = await conn.fetchrow(_LAST_SUMMARY, session.id)
                rows = await _live(conn, session, limit)
                live = await conn.fetchval(_LIVE_COUNT, session.id)
            return Recent(Summary(*summary) if summary else None,
                          [Message(Role(r["role"]), parts_from_json(r["parts"])) for r in rows], int(live))

        return await self._with_conn(read)

    async def live_count(self, session: Session) -> int:
        return int(await self.pool.fetchval(_LIVE_COUNT, session.id))

    async def summary(self, session: Session) -> Summary | None:
        row = await self.pool.fetchrow(_LAST_SUMMARY, session.id)
        return Summary(*row) if row else None

    async def save_summary(self, session: Session, summary: Summary) -> bool:
        s = summary

        async def write(conn: Connection) -> bool:
            await conn.execute(_LOCK_SESSION, session.id)  # one compaction of a session at a time
            done = await conn.fetchval(_SUMMARY_THROUGH, session.id)
            if done is not None and done >= s.through_id:
                return False
            await conn.execute(_INSERT_SUMMARY, session.id, s.run_id, s.text, s.through_id, s.messages,
                               s.tokens_before, s.tokens_after, s.created_at or time.time())
            await conn.execute(_MARK_COMPACTED, session.id, s.through_id)
            return True

        saved = await self._transact(write)
        log.info("session %s: summary through message %d %s", session.key, s.through_id,
                 "saved" if saved else "not saved (a later one exists)")
        return saved

    async def append_turn(self, turn: Turn) -> None:
        now = time.time()
        sid, run_id = turn.session.id, turn.run_id
        messages = [(sid, run_id, seq, str(m.role), parts_to_json(m.parts), now) for seq, m in enumerate(turn.messages)]
        u = turn.usage
        usage = (sid, run_id, turn.model, u.input_tokens, u.output_tokens, u.cache_read_tokens,
                 u.cache_write_tokens, turn.cost, now, None)
        charges = [(c.person, run_id, c.tokens, c.cost, now) for c in turn.charges]
        answer = sql_answers.answer_rows(turn.answer) if turn.answer is not None else None
        t = turn.trace
        closes = turn.closes
        adds = bool(turn.messages or turn.inbound_ids or answer is not None or closes is not None)
        fence = self._fence(turn.session.key) if self._fence is not None and adds else None

        async def write(conn: Connection) -> None:
            if fence is not None and (fence.token is None or await conn.fetchval(
                    _FENCE, fence.lease, fence.holder, fence.token, str(fence.idle_ms)) is None):
                raise LaneLost(f"session {turn.session.key}: lane no longer held by {fence.holder}; "
                               f"run {run_id} not stored")
            if messages:
                await conn.executemany(_INSERT_MESSAGE, messages)
            await conn.execute(_INSERT_USAGE, *usage)
            if charges:
                await conn.executemany(_INSERT_CHARGE, charges)
            if turn.settle and turn.inbound_ids:
                await conn.execute(MARK_ANSWERED, now, list(turn.inbound_ids))
            if answer is not None:
                await conn.execute(INSERT_ANSWER, *answer[0])
                await conn.executemany(INSERT_CHUNK, answer[1])
            if closes is not None:  # a scheduled task's turn: its occurrence ends with it, never run again
                await drive(conn, close(closes, now))
            if t is not None:
                await conn.execute(_INSERT_TRACE, t.run_id, t.session_key, t.agent_id, t.started_at, t.ended_at,
                                   t.status, t.model, t.input_tokens, t.output_tokens, t.cost, t.iterations, t.error,
                                   t.cache_read_tokens, t.cache_write_tokens, t.why)
                if t.spans:
                    await conn.executemany(_INSERT_SPAN, [
                        (t.run_id, str(s.kind), s.name, s.started_at, s.duration_ms, s.input_tokens, s.output_tokens,
                         s.cost, int(s.is_error), s.preview, s.cache_read_tokens, s.cache_write_tokens)
                        for s in t.spans])

        await self._transact(write)
        log.debug("session %s run %s: turn of %d messages stored", turn.session.key, run_id, len(messages))

    async def usage(self, session: Session) -> UsageTotals:
        row = await self.pool.fetchrow(_USAGE_TOTALS, session.id)
        assert row is not None, "an aggregate has a row"
        i, o, cr, cw, cost, turns = row
        return UsageTotals(i, o, cr, cw, float(cost), turns)

    async def usage_since(self, person: str, since: float) -> tuple[int, float]:
        row = await self.pool.fetchrow(_PERSON_USAGE, person, since)
        assert row is not None, "an aggregate has a row"
        tokens, cost = row
        return int(tokens), float(cost)

    async def traces(self, session_key: str | None = None, last: int = 20) -> list[TraceRecord]:
        async def read(conn: Connection) -> list[TraceRecord]:
            if session_key is None:
                rows = await conn.fetch(_LAST_TRACES, last)
            else:
                rows = await conn.fetch(_LAST_SESSION_TRACES, session_key, last)
            return await trace_records(conn, rows[::-1])

        return await self._with_conn(read)

    async def _live(self, session: Session, limit: int | None) -> list[Any]:
        return await self._with_conn(lambda conn: _live(conn, session, limit))


async def trace_records(conn: Connection, rows: list[Any]) -> list[TraceRecord]:
    """The traces of rows of ``_TRACE_COLUMNS``, in their order, each with its spans."""
    spans: dict[str, list[Span]] = {}
    for r in await conn.fetch(_SPANS, [row["run_id"] for row in rows]):
        spans.setdefault(r["run_id"], []).append(Span(
            SpanKind(r["kind"]), r["name"], r["started_at"], r["duration_ms"], r["input_tokens"],
            r["output_tokens"], r["cost"], bool(r["is_error"]), r["preview"], r["cache_read_tokens"],
            r["cache_write_tokens"]))
    return [replace(TraceRecord(*tuple(row)[:12]),  # the columns up to ``error``, in order
                    spans=tuple(spans.get(row["run_id"], ())), cache_read_tokens=row["cache_read_tokens"],
                    cache_write_tokens=row["cache_write_tokens"], why=row["model_why"])
            for row in rows]


async def _live(conn: Connection, session: Session, limit: int | None) -> list[Any]:
    """The session's live message rows, oldest first: all, or the last ``limit``."""
    if limit is not None and limit < 0:
        raise ValueError(f"history limit must be >= 0, not {limit}")
    if limit == 0:
        return []
    if limit is None:
        return list(await conn.fetch(_HISTORY, session.id))
    return list(reversed(await conn.fetch(_HISTORY_LAST, session.id, limit)))
