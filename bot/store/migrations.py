"""Ordered, named schema migrations, written once for both stores, and applying them to SQLite.

``MIGRATIONS`` is append-only: never edit or reorder a migration that has shipped, add
a new one at the end. Each is rendered for a engine (``render``: its column types are
tokens, and a migration may add what only one engine runs); PostgreSQL applies them in
``bot.store.pg.schema``. On SQLite, ``PRAGMA user_version`` holds how many have been applied
and the ``migrations`` table records each one's name and when it ran. All pending migrations
are applied in ONE transaction, so a database is either fully upgraded or untouched.

A migration is plain SQL, split into statements with ``sqlite3.complete_statement``
(so ``;`` inside strings, comments and trigger bodies is safe). Do not change
``PRAGMA foreign_keys`` in a migration: it is a no-op inside a transaction.
"""

from __future__ import annotations

import logging
import time

import aiosqlite

from bot.errors import SchemaTooNewError, StoreCorruptError
from bot.store.engine import SQLITE
from bot.store.schema_steps import Migration, render, split_statements

__all__ = ["MIGRATIONS", "MIGRATIONS_TABLE", "SCHEMA_VERSION", "Migration", "apply", "render", "split_statements"]

log = logging.getLogger(__name__)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_sessions_messages_inbound_usage",
        """
        CREATE TABLE sessions (
            id          {id},
            key         TEXT    NOT NULL,
            created_at  {real} NOT NULL,
            archived_at {real}
        );
        -- at most one current session per key; archived sessions are kept forever
        CREATE UNIQUE INDEX sessions_current_key ON sessions (key) WHERE archived_at IS NULL;

        CREATE TABLE messages (
            id         {id},
            session_id {int8} NOT NULL REFERENCES sessions (id),
            run_id     TEXT    NOT NULL,
            seq        INTEGER NOT NULL,  -- position within the turn
            role       TEXT    NOT NULL,
            parts      TEXT    NOT NULL,  -- JSON, bot.llm.parts_to_json
            created_at {real} NOT NULL
        );
        CREATE INDEX messages_session_id ON messages (session_id, id);

        CREATE TABLE inbound (
            id          {id},
            platform    TEXT NOT NULL,
            account     TEXT NOT NULL,
            chat_id     TEXT NOT NULL,
            message_id  TEXT NOT NULL,
            session_key TEXT NOT NULL,
            payload     TEXT NOT NULL,  -- JSON InboundMessage, attachments without inline data
            received_at {real} NOT NULL,
            answered_at {real},
            UNIQUE (platform, account, chat_id, message_id)
        );
        CREATE INDEX inbound_unanswered ON inbound (id) WHERE answered_at IS NULL;

        CREATE TABLE usage (
            id                 {id},
            session_id         {int8} NOT NULL REFERENCES sessions (id),
            run_id             TEXT    NOT NULL,
            model              TEXT    NOT NULL,
            input_tokens       {int8} NOT NULL,
            output_tokens      {int8} NOT NULL,
            cache_read_tokens  {int8} NOT NULL,
            cache_write_tokens {int8} NOT NULL,
            cost               {real} NOT NULL,
            created_at         {real} NOT NULL
        );
        CREATE INDEX usage_session_id ON usage (session_id);
        """,
        postgres="""
        -- a session's waiting messages (several instances hand sessions over by key)
        CREATE INDEX inbound_waiting ON inbound (session_key, id) WHERE answered_at IS NULL;
        """,
    ),
    Migration(
        "0002_traces_spans",
        """
        CREATE TABLE traces (
            run_id        TEXT PRIMARY KEY,
            session_key   TEXT    NOT NULL,
            agent_id      TEXT    NOT NULL,
            started_at    {real} NOT NULL,
            ended_at      {real} NOT NULL,
            status        TEXT    NOT NULL,
            model         TEXT    NOT NULL,
            input_tokens  {int8} NOT NULL,
            output_tokens {int8} NOT NULL,
            cost          {real} NOT NULL,
            iterations    INTEGER NOT NULL,
            error         TEXT
        );
        CREATE INDEX traces_session ON traces (session_key, started_at);
        CREATE INDEX traces_started ON traces (started_at);

        CREATE TABLE spans (
            id            {id},
            run_id        TEXT    NOT NULL REFERENCES traces (run_id),
            kind          TEXT    NOT NULL,  -- llm | tool
            name          TEXT    NOT NULL,
            started_at    {real} NOT NULL,
            duration_ms   {real} NOT NULL,
            input_tokens  {int8} NOT NULL,
            output_tokens {int8} NOT NULL,
            cost          {real} NOT NULL,
            is_error      INTEGER NOT NULL,
            preview       TEXT    NOT NULL   -- at most 500 chars, scrubbed of secrets
        );
        CREATE INDEX spans_run ON spans (run_id, id);
        """,
    ),
    Migration(
        "0003_pairing_outbound",
        """
        CREATE TABLE pairing_codes (
            code        TEXT PRIMARY KEY,  -- 8 chars, upper case (bot.pairing)
            platform    TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            user_name   TEXT NOT NULL,
            created_at  {real} NOT NULL,
            expires_at  {real} NOT NULL,
            approved_at {real} -- NULL while pending; a used code is kept
        );
        CREATE INDEX pairing_codes_pending ON pairing_codes (platform, user_id) WHERE approved_at IS NULL;

        CREATE TABLE approved_senders (
            platform    TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            name        TEXT NOT NULL,
            approved_at {real} NOT NULL,
            PRIMARY KEY (platform, user_id)
        );
        """,
        sqlite="""
        -- exactly-once delivery: one row per reply part that reached the platform (dropped by 0004)
        CREATE TABLE outbound (
            run_id              TEXT    NOT NULL,
            part                INTEGER NOT NULL,
            platform            TEXT    NOT NULL,
            chat_id             TEXT    NOT NULL,
            platform_message_id TEXT,
            sent_at             {real} NOT NULL,
            PRIMARY KEY (run_id, part)
        );
        """,
    ),
    Migration(
        "0004_durable_delivery",
        """
        -- what is owed to a chat: rendered chunks, stored with the turn, sent by delivery
        CREATE TABLE answers (
            id           TEXT    PRIMARY KEY,  -- the run id, or a notice's id
            platform     TEXT    NOT NULL,
            target       TEXT    NOT NULL,     -- JSON bot.messages.Target
            inbound_ids  TEXT    NOT NULL,     -- JSON list of inbound rows answered on delivery
            draft_id     TEXT,                 -- the streaming draft the first chunk replaces
            failed       INTEGER NOT NULL DEFAULT 0,
            created_at   {real} NOT NULL,
            delivered_at {real},                 -- every chunk sent, or given up
            given_up     INTEGER NOT NULL DEFAULT 0
        );

        -- the delivery ledger: a chunk is sent once; message_id is set when the platform took it
        CREATE TABLE chunks (
            answer_id  TEXT    NOT NULL REFERENCES answers (id),
            idx        INTEGER NOT NULL,
            text       TEXT    NOT NULL,  -- rendered in the channel's engine (a file's caption)
            file_name  TEXT,
            file_data  {blob},
            message_id TEXT,
            sent_at    {real},
            PRIMARY KEY (answer_id, idx)
        );

        -- refused and ignored messages keep only their dedupe key and time (payload '')
        CREATE INDEX inbound_forgotten ON inbound (received_at) WHERE payload = '';
        """,
        sqlite="""
        CREATE INDEX answers_undelivered ON answers (created_at) WHERE delivered_at IS NULL;
        DROP TABLE outbound;
        """,
        postgres="""
        -- SQLite's rowid: the order of storing
        ALTER TABLE answers ADD COLUMN seq BIGINT GENERATED BY DEFAULT AS IDENTITY;
        CREATE INDEX answers_undelivered ON answers (created_at, seq) WHERE delivered_at IS NULL;
        -- "is this inbound row owed an answer?" (inbound_ids @> its id) by index, not by a scan
        CREATE INDEX answers_owed ON answers USING gin ((inbound_ids::jsonb)) WHERE delivered_at IS NULL;
        """,
    ),
    Migration(
        "0005_summaries_compaction_cache_tokens",
        """
        -- compaction: a summary replaces the messages up to through_id; they stay, marked
        CREATE TABLE summaries (
            id            {id},
            session_id    {int8} NOT NULL REFERENCES sessions (id),
            run_id        TEXT    NOT NULL,
            text          TEXT    NOT NULL,
            through_id    {int8} NOT NULL,  -- the last messages.id the summary covers
            messages      INTEGER NOT NULL,  -- how many messages it replaced
            tokens_before {int8} NOT NULL,
            tokens_after  {int8} NOT NULL,
            created_at    {real} NOT NULL
        );
        CREATE INDEX summaries_session ON summaries (session_id, id);

        ALTER TABLE messages ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX messages_live ON messages (session_id, id) WHERE compacted = 0;

        -- prompt-cache tokens of runs and LLM calls, for chatgate traces
        ALTER TABLE traces ADD COLUMN cache_read_tokens {int8} NOT NULL DEFAULT 0;
        ALTER TABLE traces ADD COLUMN cache_write_tokens {int8} NOT NULL DEFAULT 0;
        ALTER TABLE spans ADD COLUMN cache_read_tokens {int8} NOT NULL DEFAULT 0;
        ALTER TABLE spans ADD COLUMN cache_write_tokens {int8} NOT NULL DEFAULT 0;
        """,
    ),
    Migration(
        "0006_usage_per_person",
        """
        -- whose request a run answered (platform:user_id), for the daily budgets per person
        ALTER TABLE usage ADD COLUMN person TEXT;
        CREATE INDEX usage_person ON usage (person, created_at) WHERE person IS NOT NULL;
        """,
    ),
    Migration(
        "0007_charges",
        """
        -- what model calls cost each person, for the daily budgets: written with every turn,
        -- a stopped run's and a compaction's included; a sub-agent's calls only in its own turn
        CREATE TABLE charges (
            id         {id},
            person     TEXT NOT NULL,
            run_id     TEXT NOT NULL,
            tokens     {int8} NOT NULL,
            cost       {real} NOT NULL,
            created_at {real} NOT NULL
        );
        CREATE INDEX charges_person ON charges (person, created_at);
        """,
        sqlite="""
        -- the runs so far; a sub-agent's row is left out, as its parent's row already counts it
        INSERT INTO charges (person, run_id, tokens, cost, created_at)
            SELECT person, run_id, input_tokens + output_tokens, cost, created_at FROM usage
            WHERE person IS NOT NULL AND run_id NOT GLOB '*-sub[0-9]*';
        """,
        postgres="""
        INSERT INTO charges (person, run_id, tokens, cost, created_at)
            SELECT person, run_id, input_tokens + output_tokens, cost, created_at FROM usage
            WHERE person IS NOT NULL AND run_id !~ '-sub[0-9]';
        """,
    ),
    Migration(
        "0008_pairing_origin",
        """
        -- where a pairing request came from (bot.pairing.origin_of: platform and bot account);
        -- the cap on pending codes is counted per origin. Codes from before count per platform.
        ALTER TABLE pairing_codes ADD COLUMN origin TEXT NOT NULL DEFAULT '';
        UPDATE pairing_codes SET origin = platform;
        CREATE INDEX pairing_codes_origin ON pairing_codes (origin, expires_at) WHERE approved_at IS NULL;
        """,
    ),
    Migration(
        "0009_inbound_context",
        """
        -- group messages kept only as context for the bot's next answer there: pruned after
        -- storage.retention.context days, text and all
        ALTER TABLE inbound ADD COLUMN context INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX inbound_context ON inbound (received_at) WHERE context = 1;
        """,
    ),
    Migration(
        "0010_approvals",
        """
        -- a tool call that waited for a person: bound to (run_id, call_id), ended once
        CREATE TABLE approvals (
            id          TEXT PRIMARY KEY,
            run_id      TEXT NOT NULL,
            call_id     TEXT NOT NULL,
            session_key TEXT NOT NULL,
            platform    TEXT NOT NULL,
            chat_id     TEXT NOT NULL,
            chat_type   TEXT NOT NULL,
            thread_id   TEXT,
            tool        TEXT NOT NULL,
            requester   TEXT NOT NULL,  -- platform:user_id of the person the run acts for
            question_id TEXT,  -- the card's platform message id, once shown
            buttons     INTEGER NOT NULL DEFAULT 0,  -- shown with buttons (else as text)
            outcome     TEXT NOT NULL DEFAULT 'pending',
            decision    TEXT,
            decided_by  TEXT,
            asked_at    {real} NOT NULL,
            decided_at  {real}
        );
        CREATE INDEX approvals_pending ON approvals (asked_at) WHERE outcome = 'pending';

        -- "Allow for this session" (holder: the session key) and "Always allow" (holder: the
        -- person; shape: the exact call)
        CREATE TABLE approval_grants (
            scope      TEXT NOT NULL,
            holder     TEXT NOT NULL,
            tool       TEXT NOT NULL,
            shape      TEXT NOT NULL,
            granted_by TEXT NOT NULL,
            granted_at {real} NOT NULL,
            PRIMARY KEY (scope, holder, tool, shape)
        );
        """,
    ),
    Migration(
        "0011_media",
        """
        -- voice answers per chat (/voice on|off|auto); a chat without a row is off
        CREATE TABLE voice_modes (
            platform   TEXT NOT NULL,
            chat_id    TEXT NOT NULL,
            mode       TEXT NOT NULL,  -- on | off | auto
            updated_at {real} NOT NULL,
            PRIMARY KEY (platform, chat_id)
        );

        -- seconds of audio transcribed per person, for limits.audio_minutes_per_day
        CREATE TABLE audio_use (
            id         {id},
            person     TEXT NOT NULL,
            seconds    {real} NOT NULL,
            created_at {real} NOT NULL
        );
        CREATE INDEX audio_use_person ON audio_use (person, created_at);

        -- a file sent from a workspace (send_file) is stored by reference and read at send
        -- time: JSON bot.messages.FileRef; voice: the file is a voice note
        ALTER TABLE chunks ADD COLUMN file_ref TEXT;
        ALTER TABLE chunks ADD COLUMN voice INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    Migration(
        "0012_schedules",
        """
        -- scheduled jobs: a rule (at / every / cron) with its IANA zone, the next occurrence as a
        -- UTC instant, and the conversation it belongs to
        CREATE TABLE jobs (
            id           {id},
            kind         TEXT    NOT NULL,  -- reminder | task
            text         TEXT    NOT NULL,
            rule         TEXT    NOT NULL,  -- at | every | cron
            zone         TEXT    NOT NULL,
            anchor       {int8} NOT NULL,  -- epoch seconds: the instant (at), the first occurrence (every)
            every        {int8} NOT NULL DEFAULT 0,  -- seconds
            cron         TEXT    NOT NULL DEFAULT '',
            state        TEXT    NOT NULL DEFAULT 'active',
            next_at      {int8},  -- epoch seconds, UTC; NULL once finished
            reason       TEXT    NOT NULL DEFAULT '',
            failures     INTEGER NOT NULL DEFAULT 0,  -- failed runs in a row
            prompt       TEXT    NOT NULL DEFAULT 'full',
            check_spec   TEXT,  -- JSON
            person       TEXT    NOT NULL,  -- whom it counts against: person:<name> or platform:user_id
            creator      TEXT    NOT NULL,  -- the creator's user id on the platform
            creator_name TEXT    NOT NULL DEFAULT '',
            session_key  TEXT    NOT NULL,
            platform     TEXT    NOT NULL,
            account      TEXT    NOT NULL,
            chat_id      TEXT    NOT NULL,
            chat_type    TEXT    NOT NULL,
            thread_id    TEXT,
            linked       TEXT,  -- the conversation's linked person (identity_links), if any
            created_at   {real} NOT NULL,
            updated_at   {real} NOT NULL
        );
        CREATE INDEX jobs_due ON jobs (next_at) WHERE state = 'active';
        CREATE INDEX jobs_person ON jobs (person, platform, chat_id) WHERE state IN ('active', 'paused');

        -- one row per occurrence, claimed before it runs: (job, instant) is its key
        CREATE TABLE occurrences (
            job_id     {int8} NOT NULL REFERENCES jobs (id),
            at         {int8} NOT NULL,  -- the scheduled instant, epoch seconds UTC
            state      TEXT    NOT NULL,  -- running | closed
            outcome    TEXT,
            late       {int8} NOT NULL DEFAULT 0,  -- seconds after its instant that it ran
            claimed_at {real} NOT NULL,
            closed_at  {real},
            PRIMARY KEY (job_id, at)
        );
        CREATE INDEX occurrences_unclosed ON occurrences (claimed_at) WHERE state = 'running';

        -- the time zone a person chose with /tz
        CREATE TABLE person_zones (
            person TEXT PRIMARY KEY,
            zone   TEXT NOT NULL,
            set_at {real} NOT NULL
        );
        """,
        postgres="""
        -- the instance running the occurrence (another takes it over when that one dies;
        -- chatgate migrate leaves it empty: a previous life's)
        ALTER TABLE occurrences ADD COLUMN claimer TEXT NOT NULL DEFAULT '';
        """,
    ),
    Migration(
        "0013_dashboard",
        """
        -- what was done from the operator dashboard, and by whom (bot.dashboard); a table of its
        -- own that touches no other, so it applies in any order among its neighbours
        CREATE TABLE dashboard_actions (
            id      {id},
            at      {real} NOT NULL,
            "user"  TEXT NOT NULL,  -- the dashboard user (as typed, when a login failed)
            role    TEXT NOT NULL,  -- viewer | operator | '' before a login
            action  TEXT NOT NULL,  -- login | logout | stop | approve | deny | pause | cancel ...
            target  TEXT NOT NULL,
            outcome TEXT NOT NULL,  -- done | refused: why | not found | failed
            address TEXT NOT NULL   -- the client address (X-Forwarded-For's behind a proxy)
        );
        CREATE INDEX dashboard_actions_at ON dashboard_actions (at);
        """,
    ),
    Migration(
        "0014_models",
        """
        -- Order-independent: new tables and a new column of traces, nothing another migration
        -- makes. The model a conversation's people picked with /model, by session key (kept
        -- across /new, restarts and compactions); no row: the default model.
        CREATE TABLE session_models (
            session_key TEXT PRIMARY KEY,
            model       TEXT NOT NULL,  -- a name in models:
            chosen_by   TEXT NOT NULL,  -- platform:user_id
            chosen_at   {real} NOT NULL
        );

        -- a session's title, made once after its first exchange
        CREATE TABLE session_titles (
            session_id {int8} PRIMARY KEY REFERENCES sessions (id),
            title      TEXT NOT NULL,
            model      TEXT NOT NULL,  -- the model id that wrote it
            created_at {real} NOT NULL
        );

        -- why a run used its model: default, chosen <name>, fallback <name> for <name>: <reason>
        ALTER TABLE traces ADD COLUMN model_why TEXT NOT NULL DEFAULT '';
        """,
    ),
    Migration(
        "0015_job_people",
        """
        -- Everyone a job was asked for by (a turn of several people's messages): their user ids,
        -- space-separated, the creator last; '' for a job of its creator alone. The job runs with
        -- the least rights among them, checked at every run.
        ALTER TABLE jobs ADD COLUMN people TEXT NOT NULL DEFAULT '';
        """,
    ),
    Migration(
        "0016_capability_migrations",
        """
        -- The migrations of the capability packages (their own tables, bot.store.steps), by name
        -- ``<capability>/NNNN_what``, applied after the core's and in any order among packages.
        CREATE TABLE capability_migrations (
            name       TEXT PRIMARY KEY,
            applied_at {real} NOT NULL
        );
        """,
    ),
    Migration(
        "0017_notes_bot_budget",
        """
        -- What a chat or a person has been told once, whichever instance told it: a fallback's
        -- "answered by" line (subject: the session key), "over your limit" (subject: the person).
        CREATE TABLE notes (
            subject TEXT NOT NULL,
            note    TEXT NOT NULL,  -- fallback:<model> | limit:<rate|tokens|cost>
            until   {real},         -- told again after this (NULL: never again)
            PRIMARY KEY (subject, note)
        );
        -- the whole bot's spending today (limits.bot_daily_tokens, limits.bot_daily_cost_usd)
        CREATE INDEX charges_created ON charges (created_at);
        """,
    ),
    Migration(
        "0018_chunks_sent_as",
        """
        -- a platform's later report on a message it took (WhatsApp's failed status) finds its chunk
        CREATE INDEX chunks_sent_as ON chunks (message_id) WHERE message_id IS NOT NULL;
        """,
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)

MIGRATIONS_TABLE = Migration("", """
CREATE TABLE IF NOT EXISTS migrations (
    id         INTEGER PRIMARY KEY,  -- = how many migrations the database then has (SQLite: its user_version)
    name       TEXT NOT NULL UNIQUE,
    applied_at {real} NOT NULL
)
""")


async def user_version(db: aiosqlite.Connection) -> int:
    rows = list(await db.execute_fetchall("PRAGMA user_version"))
    return int(rows[0][0])


async def apply(db: aiosqlite.Connection, where: str, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Bring ``db`` up to ``len(migrations)``; return how many migrations were applied.

    ``where`` names the file in errors. Raises ``SchemaTooNewError`` for a file written
    by a newer chatgate and ``StoreCorruptError`` for a foreign SQLite database."""
    known = len(migrations)
    found = await user_version(db)
    _check_not_newer(found, known, where)
    if found == known:
        return 0

    await db.execute("BEGIN IMMEDIATE")
    try:
        found = await user_version(db)  # another process may have migrated meanwhile
        _check_not_newer(found, known, where)
        if found == 0 and await _has_foreign_tables(db):
            raise StoreCorruptError(f"not a chatgate database or corrupt: {where}; move it away or set storage.path")
        await db.execute(render(MIGRATIONS_TABLE, SQLITE))
        for number, migration in enumerate(migrations[found:], start=found + 1):
            log.info("applying migration %d %s to %s", number, migration.name, where)
            for statement in split_statements(render(migration, SQLITE)):
                await db.execute(statement)
            await db.execute(
                "INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)",
                (number, migration.name, time.time()),
            )
        await db.execute(f"PRAGMA user_version = {known:d}")
        await db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            await db.execute("ROLLBACK")
        raise
    return known - found


def _check_not_newer(found: int, known: int, where: str) -> None:
    if found > known:
        raise SchemaTooNewError(
            f"{where} has schema version {found}, written by a newer chatgate; this one knows up to "
            f"version {known}: upgrade chatgate or set storage.path to another file"
        )


async def _has_foreign_tables(db: aiosqlite.Connection) -> bool:
    rows = list(
        await db.execute_fetchall(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'migrations'"
        )
    )
    return bool(rows)
