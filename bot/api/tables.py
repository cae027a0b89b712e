"""The API's tables (its keys, the threads of OpenAI-style conversations, ...), in a module of
their own: the capability's spec declares them without importing what uses them."""

from __future__ import annotations

from bot.store.schema_steps import Migration

MIGRATIONS = (
    Migration("api/0001_keys", """
CREATE TABLE api_keys (
    id         {id},
    person     TEXT NOT NULL,            -- a person of agent.identity_links, or platform:user_id
    name       TEXT NOT NULL,            -- what the key is for (Open WebUI, a script)
    digest     TEXT NOT NULL UNIQUE,     -- SHA-256 of the key, hex: the key itself is never stored
    hint       TEXT NOT NULL,            -- its last four characters
    created_at {real} NOT NULL,
    revoked_at {real}
);
"""),
    Migration("api/0002_threads", """
CREATE TABLE api_threads (
    fingerprint TEXT PRIMARY KEY,        -- person + the conversation so far (or a response id, a name), hashed
    thread      TEXT NOT NULL,           -- the session's thread: agent:...:thread:<thread>
    created_at  {real} NOT NULL
);
"""),
)
