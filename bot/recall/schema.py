"""Recall's tables: the full-text index of stored messages, and memory's passages with their vectors.

The index follows ``messages`` by triggers, so the message path runs no Python for it: SQLite
keeps an FTS5 table whose content is a view of each message's text (external content, so the
text is stored once), PostgreSQL a ``tsvector`` per message in a side table with a GIN index.
Both are built from what the database already holds when the migration runs (a backfill).
Only the words of people and the assistant are indexed: the text parts of ``user`` and
``assistant`` messages, never tool calls, results or reasoning, and never a recalled block
(``RECALLED_OPEN``: memory put into a turn is memory's, not what anybody said).

A message's text is read from its JSON parts by the database; PostgreSQL's JSON refuses an
escaped NUL or lone surrogate (``Engine.plain``), so such a message is indexed empty
rather than failing its turn's commit.
"""

from __future__ import annotations

from bot.store.schema_steps import Migration

RECALLED_OPEN = "<recalled-memory"  # how a recalled block begins (bot.recall.remind); never indexed
_N = len(RECALLED_OPEN)

_SQLITE_TEXT = (
    "(SELECT group_concat(json_extract(p.value, '$.text'), char(10)) FROM json_each({parts}) AS p"
    " WHERE json_extract(p.value, '$.type') = 'text'"
    f" AND substr(json_extract(p.value, '$.text'), 1, {_N}) <> '{RECALLED_OPEN}')"
)


def _sqlite_text(parts: str) -> str:
    return f"CASE WHEN json_valid({parts}) THEN {_SQLITE_TEXT.format(parts=parts)} END"


HISTORY_SQLITE = f"""
-- what of a message is searchable: its people's and the assistant's words (bot.recall.schema)
CREATE VIEW recall_text AS
    SELECT id, {_sqlite_text('parts')} AS body FROM messages WHERE role IN ('user', 'assistant');
CREATE VIRTUAL TABLE recall_fts USING fts5 (
    body, content = 'recall_text', content_rowid = 'id', tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER recall_messages_insert AFTER INSERT ON messages WHEN new.role IN ('user', 'assistant') BEGIN
    INSERT INTO recall_fts (rowid, body) VALUES (new.id, {_sqlite_text('new.parts')});
END;
CREATE TRIGGER recall_messages_delete AFTER DELETE ON messages WHEN old.role IN ('user', 'assistant') BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, body) VALUES ('delete', old.id, {_sqlite_text('old.parts')});
END;
CREATE TRIGGER recall_messages_update AFTER UPDATE OF parts, role ON messages BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, body)
        SELECT 'delete', old.id, {_sqlite_text('old.parts')} WHERE old.role IN ('user', 'assistant');
    INSERT INTO recall_fts (rowid, body)
        SELECT new.id, {_sqlite_text('new.parts')} WHERE new.role IN ('user', 'assistant');
END;
-- the messages stored before this migration
INSERT INTO recall_fts (rowid, body) SELECT id, body FROM recall_text;
"""

# PostgreSQL: a message's text from its parts (``parts``), and a message's words with its scope
# (``scope_id``, ``words``): the bodies of recall_text and recall_words, quoted for a function's body
_TEXT_OF_PARTS = f"""SELECT string_agg(p ->> ''text'', chr(10)) FROM json_array_elements(
        CASE WHEN parts !~ ''\\\\u(0000|[dD][89a-fA-F])'' AND left(parts, 1) = ''['' THEN parts::json
             ELSE ''[]''::json END) AS p
    WHERE p ->> ''type'' = ''text'' AND left(p ->> ''text'', {_N}) <> ''{RECALLED_OPEN}''"""
_SCOPED_WORDS = """SELECT CASE WHEN scope_id IS NULL THEN ''''::tsvector ELSE
        array_to_tsvector(ARRAY(SELECT ''s'' || scope_id || '' '' || lexeme FROM unnest(words))) END"""

# PostgreSQL: function bodies are quoted with '' (not $$), so that a statement's end is found
# the same way for both databases (bot.store.schema_steps.split_statements), and its triggers are
# made with CREATE OR REPLACE (a bare CREATE TRIGGER would make that reader wait for an END).
HISTORY_POSTGRES = f"""
CREATE FUNCTION recall_text(parts TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS '
    {_TEXT_OF_PARTS}';

CREATE TABLE recall_messages (
    message_id BIGINT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    session_id BIGINT NOT NULL,
    body       TSVECTOR NOT NULL
);
CREATE INDEX recall_messages_body ON recall_messages USING GIN (body);
CREATE INDEX recall_messages_session ON recall_messages (session_id);

CREATE FUNCTION recall_index() RETURNS TRIGGER LANGUAGE plpgsql AS '
BEGIN
    IF TG_OP = ''UPDATE'' THEN
        DELETE FROM recall_messages WHERE message_id = OLD.id;
    END IF;
    IF NEW.role IN (''user'', ''assistant'') THEN
        INSERT INTO recall_messages (message_id, session_id, body)
        VALUES (NEW.id, NEW.session_id, to_tsvector(''english'', coalesce(recall_text(NEW.parts), '''')));
    END IF;
    RETURN NULL;
END';
CREATE OR REPLACE TRIGGER recall_messages_insert AFTER INSERT ON messages FOR EACH ROW
    WHEN (NEW.role IN ('user', 'assistant')) EXECUTE FUNCTION recall_index();
CREATE OR REPLACE TRIGGER recall_messages_update AFTER UPDATE OF parts, role ON messages FOR EACH ROW
    EXECUTE FUNCTION recall_index();

-- the messages stored before this migration
INSERT INTO recall_messages (message_id, session_id, body)
    SELECT id, session_id, to_tsvector('english', coalesce(recall_text(parts), ''))
    FROM messages WHERE role IN ('user', 'assistant');
"""

# recall/0003: the scope of each message is in the index, so that a search meets the scope's
# messages and the words together, before anything is ranked. A session's scope token
# (``bot.recall.scope.scope_token``: its key without a thread, for a DM or a group's shared
# conversation; the whole key for a member's own session or a sub-agent's) is numbered once in
# ``recall_scopes``; ``recall_sessions`` gives each session its number, set by a trigger when
# the session is made. SQLite's FTS5 table gets a second column, ``scope``, holding ``s<number>``
# (searched in that column only: a word said is never a scope); PostgreSQL's ``recall_messages``
# a ``scope_id`` column, and its words each prefixed with the scope (``recall_words``): a GIN of
# them, and a btree on (scope_id, message_id) that includes them (bot.recall.history).
SCOPES = """
CREATE TABLE recall_scopes (
    id    {id},
    token TEXT NOT NULL UNIQUE  -- bot.recall.scope.scope_token of a session key
);
CREATE TABLE recall_sessions (
    session_id {int8} PRIMARY KEY,  -- sessions (id)
    scope_id   {int8} NOT NULL      -- recall_scopes (id)
);
"""


def _after_colon(text: str) -> str:
    """SQLite: what follows the first ':' of ``text`` (NULL when there is none)."""
    return f"CASE WHEN instr({text}, ':') > 0 THEN substr({text}, instr({text}, ':') + 1) END"


def _nth_after(text: str, n: int) -> str:
    for _ in range(n):
        text = _after_colon(text)
    return text


# a session key's parts: agent:{agent}:dm:{person}[...] (a linked DM, 4 parts) or
# agent:{agent}:{platform}:{dm|group}:{peer}[...] (5); ``rest`` is what follows them (NULL: nothing)
_SESSION_SCOPES = f"""
CREATE VIEW recall_session_scopes AS
    SELECT id, CASE WHEN rest IS NULL THEN key
                    WHEN substr(rest, 1, 7) = 'thread:' AND instr(substr(rest, 8), ':') = 0
                        THEN substr(key, 1, length(key) - length(rest) - 1)
                    ELSE key END AS token
    FROM (SELECT id, key, CASE WHEN substr(t, 1, 3) = 'dm:' THEN {_nth_after('t', 2)} ELSE {_nth_after('t', 3)} END
                 AS rest
          FROM (SELECT id, key, {_nth_after('key', 2)} AS t FROM sessions) AS a) AS b;
"""

_SCOPE_OF = "(SELECT 's' || scope_id FROM recall_sessions WHERE session_id = {row}.session_id)"

SCOPED_SQLITE = f"""
DROP TRIGGER recall_messages_insert;
DROP TRIGGER recall_messages_delete;
DROP TRIGGER recall_messages_update;
DROP TABLE recall_fts;
DROP VIEW recall_text;
{_SESSION_SCOPES}
CREATE TRIGGER recall_sessions_insert AFTER INSERT ON sessions BEGIN
    INSERT OR IGNORE INTO recall_scopes (token) SELECT token FROM recall_session_scopes WHERE id = new.id;
    INSERT INTO recall_sessions (session_id, scope_id)
        SELECT new.id, c.id FROM recall_session_scopes v JOIN recall_scopes c ON c.token = v.token WHERE v.id = new.id;
END;
CREATE VIEW recall_text AS
    SELECT m.id, {_sqlite_text('m.parts')} AS body, 's' || r.scope_id AS scope
    FROM messages m LEFT JOIN recall_sessions r ON r.session_id = m.session_id WHERE m.role IN ('user', 'assistant');
CREATE VIRTUAL TABLE recall_fts USING fts5 (
    body, scope, content = 'recall_text', content_rowid = 'id', tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER recall_messages_insert AFTER INSERT ON messages WHEN new.role IN ('user', 'assistant') BEGIN
    INSERT INTO recall_fts (rowid, body, scope)
        VALUES (new.id, {_sqlite_text('new.parts')}, {_SCOPE_OF.format(row='new')});
END;
CREATE TRIGGER recall_messages_delete AFTER DELETE ON messages WHEN old.role IN ('user', 'assistant') BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, body, scope)
        VALUES ('delete', old.id, {_sqlite_text('old.parts')}, {_SCOPE_OF.format(row='old')});
END;
CREATE TRIGGER recall_messages_update AFTER UPDATE OF parts, role, session_id ON messages BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, body, scope)
        SELECT 'delete', old.id, {_sqlite_text('old.parts')}, {_SCOPE_OF.format(row='old')}
        WHERE old.role IN ('user', 'assistant');
    INSERT INTO recall_fts (rowid, body, scope)
        SELECT new.id, {_sqlite_text('new.parts')}, {_SCOPE_OF.format(row='new')}
        WHERE new.role IN ('user', 'assistant');
END;
-- the sessions and messages stored before this migration
INSERT OR IGNORE INTO recall_scopes (token) SELECT token FROM recall_session_scopes ORDER BY id;
INSERT INTO recall_sessions (session_id, scope_id)
    SELECT v.id, c.id FROM recall_session_scopes v JOIN recall_scopes c ON c.token = v.token;
INSERT INTO recall_fts (rowid, body, scope) SELECT id, body, scope FROM recall_text;
"""

SCOPED_POSTGRES = f"""
CREATE FUNCTION recall_scope_token(key TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS '
    SELECT CASE WHEN cardinality(p) <= n THEN key
                WHEN cardinality(p) = n + 2 AND p[n + 1] = ''thread'' THEN array_to_string(p[1:n], '':'')
                ELSE key END
    FROM (SELECT p, CASE WHEN p[3] = ''dm'' THEN 4 ELSE 5 END AS n
          FROM (SELECT string_to_array(key, '':'') AS p) AS a) AS b';

CREATE FUNCTION recall_scope() RETURNS TRIGGER LANGUAGE plpgsql AS '
BEGIN
    INSERT INTO recall_scopes (token) VALUES (recall_scope_token(NEW.key)) ON CONFLICT (token) DO NOTHING;
    INSERT INTO recall_sessions (session_id, scope_id)
        SELECT NEW.id, id FROM recall_scopes WHERE token = recall_scope_token(NEW.key);
    RETURN NULL;
END';
CREATE OR REPLACE TRIGGER recall_sessions_insert AFTER INSERT ON sessions FOR EACH ROW
    EXECUTE FUNCTION recall_scope();

-- a message's words, each with its scope before it: s<scope id>, a space, the lexeme (a lexeme of the
-- parser never holds a space), so that one posting list of the GIN is one scope's messages with a word
CREATE FUNCTION recall_words(scope_id BIGINT, words TSVECTOR) RETURNS TSVECTOR LANGUAGE sql IMMUTABLE
    PARALLEL SAFE AS '
    {_SCOPED_WORDS}';

ALTER TABLE recall_messages ADD COLUMN scope_id BIGINT;
CREATE OR REPLACE FUNCTION recall_index() RETURNS TRIGGER LANGUAGE plpgsql AS '
DECLARE
    scope BIGINT;
BEGIN
    IF TG_OP = ''UPDATE'' THEN
        DELETE FROM recall_messages WHERE message_id = OLD.id;
    END IF;
    IF NEW.role IN (''user'', ''assistant'') THEN
        SELECT r.scope_id INTO scope FROM recall_sessions r WHERE r.session_id = NEW.session_id;
        INSERT INTO recall_messages (message_id, session_id, scope_id, body)
        VALUES (NEW.id, NEW.session_id, scope,
                recall_words(scope, to_tsvector(''english'', coalesce(recall_text(NEW.parts), ''''))));
    END IF;
    RETURN NULL;
END';
CREATE OR REPLACE TRIGGER recall_messages_update AFTER UPDATE OF parts, role, session_id ON messages FOR EACH ROW
    EXECUTE FUNCTION recall_index();

-- the sessions and messages stored before this migration
INSERT INTO recall_scopes (token) SELECT recall_scope_token(key) FROM sessions GROUP BY 1 ORDER BY min(id)
    ON CONFLICT (token) DO NOTHING;
INSERT INTO recall_sessions (session_id, scope_id)
    SELECT s.id, c.id FROM sessions s JOIN recall_scopes c ON c.token = recall_scope_token(s.key);
SET LOCAL maintenance_work_mem = '256MB';
DROP INDEX recall_messages_body;
DROP INDEX recall_messages_session;
UPDATE recall_messages r SET scope_id = x.scope_id, body = recall_words(x.scope_id, r.body)
    FROM recall_sessions x WHERE x.session_id = r.session_id;
UPDATE recall_messages SET body = ''::tsvector WHERE scope_id IS NULL;
CREATE INDEX recall_messages_words ON recall_messages USING GIN (body);
-- a scope's newest messages with their words, read from the index alone (a common word's matches)
CREATE INDEX recall_messages_scope ON recall_messages (scope_id, message_id) INCLUDE (body);
ANALYZE recall_messages;  -- the planner's estimates of the new words choose a search's way at once
"""

PASSAGES = """
-- Memory files (MEMORY.md, memory/*.md) cut into passages, per workspace, each with its vector
-- when embeddings are on; a passage is embedded once per text (hash) and model.
CREATE TABLE recall_passages (
    id         {id},
    workspace  TEXT    NOT NULL,  -- the workspace's folder name (bot.conversation.workspace_name)
    path       TEXT    NOT NULL,  -- MEMORY.md or memory/...
    start_line INTEGER NOT NULL,
    end_line   INTEGER NOT NULL,
    heading    TEXT    NOT NULL,
    hash       TEXT    NOT NULL,  -- sha256 of the text
    model      TEXT    NOT NULL,  -- the embedding model and dimensions of vector
    vector     {blob},            -- float32, unit length
    created_at {real}  NOT NULL
);
CREATE INDEX recall_passages_workspace ON recall_passages (workspace, path);
CREATE INDEX recall_passages_hash ON recall_passages (workspace, hash);
"""

# recall/0004: the index's two functions in PL/pgSQL, which keeps a function's plan for its session;
# PostgreSQL before 18 parses and plans a LANGUAGE sql function that it cannot inline (these two
# hold a subquery) at every call, and the trigger calls both for each message stored: they were
# 13 % of the server's CPU per message (perf, the overhead benchmark on PostgreSQL 15)
CACHED_POSTGRES = f"""
CREATE OR REPLACE FUNCTION recall_text(parts TEXT) RETURNS TEXT LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS '
BEGIN
    RETURN ({_TEXT_OF_PARTS});
END';
CREATE OR REPLACE FUNCTION recall_words(scope_id BIGINT, words TSVECTOR) RETURNS TSVECTOR LANGUAGE plpgsql IMMUTABLE
    PARALLEL SAFE AS '
BEGIN
    RETURN ({_SCOPED_WORDS});
END';
"""

MIGRATIONS = (
    Migration("recall/0001_history_index", "", sqlite=HISTORY_SQLITE, postgres=HISTORY_POSTGRES),
    Migration("recall/0002_passages", PASSAGES),
    Migration("recall/0003_scoped_history", SCOPES, sqlite=SCOPED_SQLITE, postgres=SCOPED_POSTGRES),
    Migration("recall/0004_cached_plans", "", postgres=CACHED_POSTGRES),
)
