"""history_search's store half: the stored messages a scope may see that match some words, best
first, written once for both databases (SQLite's FTS5 and BM25; PostgreSQL's ``tsvector`` and
``ts_rank_cd``). The scope is part of the statement (``Scope.where``), never a filter after it.

The pure half: the words of a query (``terms``), the text of a stored message (``text_of``), and
a snippet around the first word found (``snippet``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from bot.recall.schema import RECALLED_OPEN
from bot.recall.scope import Scope
from bot.store.dialect import SqlDialect
from bot.store.op import Op, rows

MAX_TERMS = 12
SNIPPET_CHARS = 300
_WORD = re.compile(r"\w+", re.UNICODE)
STOP_WORDS = frozenset("""
a about an and are as at be but by can could did do does for from had has have he her his how i if in into is it
its me my no not of on or our she so than that the their them then there these they this to was we were what when
where which who why will with would you your said say tell told
""".split())

_COLUMNS = "m.id, m.session_id, s.key, m.created_at, m.role, m.run_id, m.parts"
SQLITE_SEARCH = (
    f"SELECT {_COLUMNS}, bm25(recall_fts) AS score FROM recall_fts"
    " JOIN messages m ON m.id = recall_fts.rowid JOIN sessions s ON s.id = m.session_id"
    " WHERE recall_fts MATCH ? AND {scope} ORDER BY score, m.id DESC LIMIT ?"
)
POSTGRES_SEARCH = (
    f"SELECT {_COLUMNS}, ts_rank_cd(r.body, q.q) AS score"
    " FROM (SELECT to_tsquery('english', ?) AS q) AS q, recall_messages r"
    " JOIN messages m ON m.id = r.message_id JOIN sessions s ON s.id = r.session_id"
    " WHERE r.body @@ q.q AND {scope} ORDER BY score DESC, m.id DESC LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class Hit:
    """One stored message found: where it is (session, message, the turn's run) and when."""

    message_id: int
    session_id: int
    session_key: str
    at: float
    role: str  # user | assistant
    run_id: str
    text: str
    score: float  # higher is better


def terms(query: str) -> list[str]:
    """The words searched for: lower-cased, each once, without stop words (digits kept)."""
    words = [w for w in _WORD.findall(query.casefold()) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    return list(dict.fromkeys(words))[:MAX_TERMS]


def match_text(dialect: SqlDialect, words: list[str]) -> str:
    """The full-text query of ``words``, any of them (the best match has most): FTS5's or tsquery's."""
    if dialect.name == "postgres":
        return " | ".join(words)
    return " OR ".join(f'"{w}"' for w in words)


def text_of(parts: str) -> str:
    """The searchable text of a message's stored parts (what the index holds)."""
    try:
        items = json.loads(parts)
    except ValueError:
        return ""
    return "\n".join(p["text"] for p in items if isinstance(p, dict) and p.get("type") == "text"
                     and isinstance(p.get("text"), str) and not p["text"].startswith(RECALLED_OPEN))


def snippet(text: str, words: list[str], size: int = SNIPPET_CHARS) -> str:
    """About ``size`` characters of ``text`` around the first of ``words`` in it (a word's stem
    counts: "meetings" finds "meeting"), on one line."""
    flat = " ".join(text.split())
    if len(flat) <= size:
        return flat
    low = flat.casefold()
    found = [i for w in words if (i := low.find(w[:max(3, len(w) - 3)])) >= 0]
    at = min(found) if found else 0
    start = max(0, min(at - size // 3, len(flat) - size))
    cut = flat[start:start + size]
    return ("…" if start else "") + cut + ("…" if start + size < len(flat) else "")


def search(dialect: SqlDialect, scope: Scope, words: list[str], limit: int) -> Op[list[Hit]]:
    """The ``limit`` best messages of ``scope`` for ``words``."""
    if not words:
        return []
    where, args = scope.where("s.key")
    sql = (POSTGRES_SEARCH if dialect.name == "postgres" else SQLITE_SEARCH).format(scope=where)
    found = yield from rows(sql, match_text(dialect, words), *args, limit)
    sign = 1.0 if dialect.name == "postgres" else -1.0  # bm25: lower is better
    return [Hit(int(r[0]), int(r[1]), str(r[2]), float(r[3]), str(r[4]), str(r[5]), text_of(str(r[6])),
                sign * float(r[7])) for r in found]
