"""Sign-in links (``chatgate webchat invite PERSON``) and codes sent to a linked chat: each
works once, until it expires; only its SHA-256 is stored. A person's web conversations are
listed from ``webchat_threads``."""

from __future__ import annotations

import hashlib
import secrets
import time

from bot.store.op import Op, count, execute, rows, value
from bot.store.schema_steps import Migration

MIGRATIONS = (
    Migration("webchat/0001_invites", """
CREATE TABLE webchat_invites (
    digest     TEXT PRIMARY KEY,   -- SHA-256 of the link's token (or of person + code)
    person     TEXT NOT NULL,
    expires_at {real} NOT NULL
);
CREATE TABLE webchat_threads (
    person     TEXT NOT NULL,
    thread     TEXT NOT NULL,
    title      TEXT NOT NULL,
    created_at {real} NOT NULL,
    PRIMARY KEY (person, thread)
);
"""),
)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


def add(token: str, person: str, lifetime: float) -> Op[None]:
    yield from execute("INSERT INTO webchat_invites (digest, person, expires_at) VALUES (?, ?, ?)",
                       digest(token), person, time.time() + lifetime)


def take(token: str) -> Op[str | None]:
    """The person of a live token, which is used up by this."""
    key = digest(token)
    person = yield from value("SELECT person FROM webchat_invites WHERE digest = ? AND expires_at > ?", key,
                              time.time())
    if person is None:
        return None
    taken = yield from count("DELETE FROM webchat_invites WHERE digest = ?", key)
    return str(person) if taken == 1 else None


def threads(person: str) -> Op[list[tuple[str, str]]]:
    return [(str(t), str(title)) for t, title in (yield from rows(
        "SELECT thread, title FROM webchat_threads WHERE person = ? ORDER BY created_at DESC LIMIT 50", person))]


def add_thread(person: str, thread: str, title: str) -> Op[None]:
    yield from execute("INSERT INTO webchat_threads (person, thread, title, created_at) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT (person, thread) DO NOTHING", person, thread, title[:80], time.time())


def owns(person: str, thread: str) -> Op[bool]:
    found = yield from value("SELECT 1 FROM webchat_threads WHERE person = ? AND thread = ?", person, thread)
    return found is not None
