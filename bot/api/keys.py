"""API keys: one per person and client, shown once, stored as a hash only.

A key is ``cg-`` and 43 random URL-safe characters; the table keeps its SHA-256 (a key is
random enough that a slow hash would add nothing), the person it acts for, a name and the
key's last four characters to tell keys apart in ``chatgate api key list``. A request's key
is looked up by its hash; a revoked key is kept (``revoked_at``) so the list shows it.

The sessions the API continues (``bot.api.sessions``) are a table of this capability too.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from bot.store.op import Op, count, inserted, one, rows

PREFIX = "cg-"



@dataclass(frozen=True, slots=True)
class ApiKey:
    id: int
    person: str
    name: str
    hint: str
    created_at: float
    revoked_at: float | None = None


def new_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_a_key(text: str) -> bool:
    return text.startswith(PREFIX) and 20 <= len(text) <= 100


def add_key(person: str, name: str, key: str) -> Op[int | None]:
    return (yield from inserted("INSERT INTO api_keys (person, name, digest, hint, created_at) VALUES (?, ?, ?, ?, ?)",
                                person, name, digest(key), key[-4:], time.time()))


def key_of(key: str) -> Op[ApiKey | None]:
    """The live key ``key`` is, None when unknown or revoked."""
    row = yield from one("SELECT id, person, name, hint, created_at, revoked_at FROM api_keys "
                         "WHERE digest = ? AND revoked_at IS NULL", digest(key))
    return None if row is None else ApiKey(*row)


def all_keys() -> Op[list[ApiKey]]:
    return [ApiKey(*row) for row in (yield from rows(
        "SELECT id, person, name, hint, created_at, revoked_at FROM api_keys ORDER BY id"))]


def revoke(key_id: int) -> Op[bool]:
    return (yield from count("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                             time.time(), key_id)) == 1
