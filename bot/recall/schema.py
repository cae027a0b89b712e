"""Recall's tables: the full-text index of stored messages, and memory's passages with their vectors.

The index follows ``messages`` by triggers, so the message path runs no Python for it: SQLite
keeps an FTS5 table whose content is a view of each message's text (external content, so the
text is stored once), PostgreSQL a ``tsvector`` per message in a side table with a GIN index.
Both are built from what the database already holds when the migration runs (a backfill).
Only the words of people and the assistant are indexed: the text parts of ``user`` and
``assistant`` messages, never tool calls, results or reasoning, and never a recalled block
(``RECALLED_OPEN``: memory put into a turn is memory's, not what anybody said).

A message's text is read from its JSON parts by the database; PostgreSQL's JSON refuses an
escaped NUL or lone surrogate (``SqlDialect.plain``), so such a message is indexed empty
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

# PostgreSQL: function bodies are quoted with '' (not $$), so that a statement's end is found
# the same way for both databases (bot.store.schema_steps.split_statements), and its triggers are
# made with CREATE OR REPLACE (a bare CREATE TRIGGER would make that reader wait for an END).
HISTORY_POSTGRES = f"""
CREATE FUNCTION recall_text(parts TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS '
    SELECT string_agg(p ->> ''text'', chr(10)) FROM json_array_elements(
        CASE WHEN parts !~ ''\\\\u(0000|[dD][89a-fA-F])'' AND left(parts, 1) = ''['' THEN parts::json
             ELSE ''[]''::json END) AS p
    WHERE p ->> ''type'' = ''text'' AND left(p ->> ''text'', {_N}) <> ''{RECALLED_OPEN}''';

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

MIGRATIONS = (
    Migration("recall/0001_history_index", "", sqlite=HISTORY_SQLITE, postgres=HISTORY_POSTGRES),
    Migration("recall/0002_passages", PASSAGES),
)
