"""Which session a request continues: the server keeps the conversation, the client may not.

- A client that names its session (the ``X-Chatgate-Session`` header, ``metadata.session``,
  or ``user``) always gets that session (the person's own: two people's names never meet);
  only the new user message is taken, whatever history comes with it.
- ``/v1/responses`` with ``previous_response_id`` continues the session of that response (the
  person's own response: anyone else's id is unknown, 404).
- Otherwise the history the client resends is recognised: after each answer the conversation
  so far (every user and assistant text, the answer last) is remembered by its hash; a
  request whose history before its new user message hashes to one of those continues that
  session. A history that matches none (edited, from elsewhere) starts a new session, as
  does a request with no history before its message.

Only hashes are stored (``api_threads``), each with the person in it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Sequence

from bot.api.wire import Said
from bot.store.op import Op, execute, value


def fingerprint(person: str, history: Sequence[Said]) -> str:
    said = [[s.role, " ".join(s.text.split())] for s in history]
    return hashlib.sha256(json.dumps([person, said], ensure_ascii=False).encode()).hexdigest()


def named(person: str, name: str) -> str:
    """The thread of a session the client names."""
    return "n" + hashlib.sha256(json.dumps([person, name]).encode()).hexdigest()[:20]


def response_key(person: str, response_id: str) -> str:
    return hashlib.sha256(json.dumps([person, "response", response_id]).encode()).hexdigest()


def new_thread() -> str:
    return "t" + secrets.token_hex(10)


def thread_of(key: str) -> Op[str | None]:
    found = yield from value("SELECT thread FROM api_threads WHERE fingerprint = ?", key)
    return None if found is None else str(found)


def remember(keys: Sequence[str], thread: str) -> Op[None]:
    for key in keys:
        yield from execute("INSERT INTO api_threads (fingerprint, thread, created_at) VALUES (?, ?, ?) "
                           "ON CONFLICT (fingerprint) DO UPDATE SET thread = excluded.thread", key, thread, time.time())
