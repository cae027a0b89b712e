"""Sign-in links (``chatgate webchat invite PERSON``) and codes sent to a linked chat: each
works once, until it expires; only its SHA-256 is stored. A person's web conversations are
listed from ``webchat_threads``; ``webchat_log`` is what each showed (the person's text as
they typed it, the answers as HTML), shown again when the page is loaded."""

from __future__ import annotations

import hashlib
import secrets
import time

from bot.store.op import Op, count, execute, inserted, rows, value
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
    Migration("webchat/0002_log", """
CREATE TABLE webchat_log (
    id         {id},
    thread     TEXT NOT NULL,
    role       TEXT NOT NULL,      -- user (as typed) or assistant (the dialect's HTML)
    body       TEXT NOT NULL,
    at         {real} NOT NULL
);
CREATE INDEX webchat_log_thread ON webchat_log (thread, id);
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


def add_thread(person: str, thread: str, title: str) -> Op[bool]:
    """Whether the thread is new (it is listed from now on)."""
    return (yield from count("INSERT INTO webchat_threads (person, thread, title, created_at) VALUES (?, ?, ?, ?) "
                             "ON CONFLICT (person, thread) DO NOTHING", person, thread, title[:80], time.time())) == 1


def retitle(person: str, thread: str, title: str) -> Op[bool]:
    """Whether the title changed."""
    return (yield from count("UPDATE webchat_threads SET title = ? WHERE person = ? AND thread = ? AND title <> ?",
                             title[:80], person, thread, title[:80])) == 1


def owner_of(thread: str) -> Op[str | None]:
    found = yield from value("SELECT person FROM webchat_threads WHERE thread = ?", thread)
    return None if found is None else str(found)


def said(thread: str, role: str, body: str) -> Op[int]:
    """A line of ``thread`` as its page shows it: its row's id."""
    return (yield from inserted("INSERT INTO webchat_log (thread, role, body, at) VALUES (?, ?, ?, ?)",
                                thread, role, body, time.time())) or 0


def shown(thread: str, last: int = 100) -> Op[list[tuple[int, str, str]]]:
    """The last ``last`` lines of ``thread``, oldest first."""
    found = yield from rows("SELECT id, role, body FROM webchat_log WHERE thread = ? ORDER BY id DESC LIMIT ?",
                            thread, last)
    return [(int(i), str(role), str(body)) for i, role, body in reversed(found)]
