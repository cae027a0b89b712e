"""history_search's store half: the stored messages a scope may see that match some words, best
first (``search``), on SQLite's FTS5 and PostgreSQL's ``tsvector``. The scope is in the index:
each message carries its scope's token (bot.recall.schema), and every read of the index names
the scope's tokens with the word (``Scope.tokens``), so no other scope's message is ever read,
counted or ranked; the few messages returned are checked against ``Scope.where`` as well.

The pure half: the words of a query (``terms``), the text of a stored message (``text_of``), and
a snippet around the first word found (``snippet``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from bot.recall.schema import RECALLED_OPEN
from bot.recall.scope import Scope
from bot.store.engine import Engine
from bot.store.op import Op, rows, value

MAX_TERMS = 12
SNIPPET_CHARS = 300
_WORD = re.compile(r"\w+", re.UNICODE)
STOP_WORDS = frozenset("""
a about an and are as at be but by can could did do does for from had has have he her his how i if in into is it
its me my no not of on or our she so than that the their them then there these they this to was we were what when
where which who why will with would you your said say tell told
""".split())

WINDOW = 1000  # per word, at most this many of the scope's newest messages with it are read
RECENT = 4000  # PostgreSQL, a word in more than WINDOW: its matches among this many newest of the scope
CHECKED = 8  # times the limit: the best candidates whose older matches of common words are looked up

_COLUMNS = "m.id, m.session_id, s.key, m.created_at, m.role, m.run_id, m.parts"
SQLITE_WORD = "SELECT rowid FROM recall_fts WHERE recall_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
SQLITE_HAS = "SELECT rowid FROM recall_fts WHERE recall_fts MATCH ? AND {ids}"
POSTGRES_LEXEMES = "SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('english', w))) FROM unnest(?::text[]) AS w"
POSTGRES_WORD = "SELECT message_id FROM recall_messages WHERE body @@ ?::tsquery LIMIT ?"
POSTGRES_ESTIMATE = "EXPLAIN (FORMAT JSON) SELECT message_id FROM recall_messages WHERE body @@ ?::tsquery"
POSTGRES_RECENT = ("SELECT min(message_id), array_agg(message_id) FILTER (WHERE body @@ ?::tsquery)"
                   " FROM (SELECT message_id, body FROM recall_messages WHERE scope_id = ?"
                   " ORDER BY scope_id DESC, message_id DESC LIMIT ?) AS r")
POSTGRES_HAS = "SELECT message_id FROM recall_messages WHERE {ids} AND body @@ ?::tsquery"
FOUND = f"SELECT {_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id WHERE {{ids}} AND {{scope}}"


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


def match_text(scope_ids: list[int], word: str, *, scoped: bool = True) -> str:
    """SQLite: the FTS5 query of ``word`` in the body of the messages of ``scope_ids``."""
    found = f'body : "{word}"'
    return f"scope : ({' OR '.join(f's{i}' for i in scope_ids)}) AND {found}" if scoped else found


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


def search(engine: Engine, scope: Scope, words: list[str], limit: int) -> Op[list[Hit]]:
    """The ``limit`` best messages of ``scope`` for ``words``: a message weighs the sum of its
    words' inverse document frequencies (BM25's, over all the stored messages), so the rarest
    words decide; the newest first among equals.

    The work is bounded whatever the words, however many messages hold them: a word is read
    from the index in the scope, newest first, at most ``WINDOW`` messages of it. A rarer word
    is read whole (its oldest message is found); a commoner one weighs little, and only its
    newest messages are candidates; the best candidates are then asked whether they hold it
    too (``CHECKED``), so its weight counts for an older message as well."""
    if not words:
        return []
    tokens = scope.tokens()
    if not tokens:
        return []
    which, args = engine.any_of("token", tokens, "text")
    scope_ids = [int(r[0]) for r in (yield from rows(f"SELECT id FROM recall_scopes WHERE {which}", *args))]
    if not scope_ids:
        return []
    found: dict[str, Matches] = {}
    lexemes: dict[str, list[str]] = {}
    if engine.name == "postgres":
        lexemes = {str(r[0]): list(r[1]) for r in (yield from rows(POSTGRES_LEXEMES, words))}
        for word in words:
            found[word] = yield from _newest_pg(scope_ids, _tsquery(scope_ids, lexemes.get(word, [])))
    else:
        for word in words:
            ids = [int(r[0]) for r in (yield from rows(SQLITE_WORD, match_text(scope_ids, word), WINDOW))]
            found[word] = Matches(ids, ids[-1] if len(ids) >= WINDOW else 0)
    total = int((yield from value("SELECT coalesce(max(id), 0) FROM messages")) or 0)
    weight = {w: _idf(total, m) for w, m in found.items()}
    known = {w: set(m.ids) for w, m in found.items()}
    scores: dict[int, float] = {}
    for w, m in found.items():
        for i in m.ids:
            scores[i] = scores.get(i, 0.0) + weight[w]
    best = sorted(scores, key=lambda i: (scores[i], i), reverse=True)[:limit * CHECKED]
    for w, m in found.items():
        if older := [i for i in best if i < m.known_from and i not in known[w]]:
            for i in (yield from _holding(engine, scope_ids, older, w, lexemes)):
                scores[i] += weight[w]
    chosen = sorted(best, key=lambda i: (scores[i], i), reverse=True)[:limit]
    if not chosen:
        return []
    ids_sql, ids_args = engine.any_of("m.id", chosen, "bigint")
    where, where_args = scope.where("s.key")
    got = yield from rows(FOUND.format(ids=ids_sql, scope=where), *ids_args, *where_args)
    hits = [Hit(int(r[0]), int(r[1]), str(r[2]), float(r[3]), str(r[4]), str(r[5]), text_of(str(r[6])),
                scores[int(r[0])]) for r in got]
    return sorted(hits, key=lambda h: (h.score, h.message_id), reverse=True)


@dataclass(frozen=True, slots=True)
class Matches:
    """A word's messages in the scope, newest first: every one from id ``known_from`` on (0: all)."""

    ids: list[int]
    known_from: int


def _tsquery(scope_ids: list[int], lexemes: list[str]) -> str:
    """PostgreSQL: the tsquery of a word's lexemes in the scopes (as ``recall_words`` stores them)."""
    if not lexemes:
        return ""
    quoted = [["'" + f"s{i} {x}".replace("\\", "\\\\").replace("'", "''") + "'" for x in lexemes] for i in scope_ids]
    return " | ".join("(" + " & ".join(q) + ")" for q in quoted)


def _newest_pg(scope_ids: list[int], query: str) -> Op[Matches]:
    """A word's messages: all of them when at most ``WINDOW`` (by the GIN), else its matches among
    the ``RECENT`` newest messages of the scope (by the btree of scope and id, which holds the
    words: no table row is read). Which way is chosen from the planner's estimate of the
    messages holding it (its statistics of the commonest lexemes, kept by ANALYZE): a common
    word never makes the GIN's rows be read one by one. Statistics older than the table (a copy
    or a restore not yet analyzed, rows deleted since) may call a rare word common: when none of
    the newest messages holds it, the GIN is asked after all (bounded as above)."""
    if not query:
        return Matches([], 0)
    plan = yield from value(POSTGRES_ESTIMATE, query)
    estimate = float((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"])
    if estimate <= WINDOW and (every := (yield from _every_pg(query))) is not None:
        return every
    found: list[int] = []
    known_from = 0  # each scope's walk read every message of it from its oldest on
    for scope_id in scope_ids:
        for oldest, ids_ in (yield from rows(POSTGRES_RECENT, query, scope_id, RECENT)):
            found += [int(i) for i in ids_ or ()]
            known_from = max(known_from, int(oldest or 0))
    if estimate > WINDOW and not found and (every := (yield from _every_pg(query))) is not None:
        return every
    return Matches(sorted(found, reverse=True), known_from)


def _every_pg(query: str) -> Op[Matches | None]:
    """Every message holding the word, by the GIN, when at most ``WINDOW`` do; else None."""
    ids = [int(r[0]) for r in (yield from rows(POSTGRES_WORD, query, WINDOW + 1))]
    return Matches(sorted(ids, reverse=True), 0) if len(ids) <= WINDOW else None


def _holding(engine: Engine, scope_ids: list[int], ids: list[int], word: str,
             lexemes: dict[str, list[str]]) -> Op[list[int]]:
    """Which of the messages ``ids`` hold ``word``."""
    if engine.name == "postgres":
        which, args = engine.any_of("message_id", ids, "bigint")
        got = yield from rows(POSTGRES_HAS.format(ids=which), *args, _tsquery(scope_ids, lexemes.get(word, [])))
    else:
        which, args = engine.any_of("rowid", ids, "bigint")
        got = yield from rows(SQLITE_HAS.format(ids=which), match_text([], word, scoped=False), *args)
    return [int(r[0]) for r in got]


def _idf(total: int, found: Matches) -> float:
    """A word's weight: BM25's inverse document frequency of the messages holding it. When all are
    known, their count; else told from how far back the known ones reach (as dense before)."""
    if not found.ids:
        return 0.0
    count = float(len(found.ids))
    if found.known_from:
        count = count * total / max(1, total - found.known_from + 1)
    return math.log(1.0 + (max(total, count) - count + 0.5) / (count + 0.5))
