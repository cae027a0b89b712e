"""The Store port: sessions, their history, the inbound log and usage.

SQLite (``bot.store.sqlite``) is the implementation today; the same contract suite
(tests/test_store_contract.py) is what a PostgreSQL store would have to pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from bot.conversation import Message
from bot.messages import InboundMessage
from bot.providers.base import Usage
from bot.tracing import TraceRecord


@dataclass(frozen=True, slots=True)
class Session:
    id: int
    key: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Turn:
    """Everything one run adds to a session, written in one transaction.

    ``messages`` are in order: the user message(s), assistant and tool messages, the
    final answer. ``inbound_ids`` are the inbound log rows this turn answered."""

    session: Session
    run_id: str
    messages: tuple[Message, ...]
    usage: Usage = Usage()
    cost: float = 0.0
    model: str = ""
    inbound_ids: tuple[int, ...] = ()
    trace: TraceRecord | None = None


@dataclass(frozen=True, slots=True)
class UsageTotals:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    turns: int = 0


@dataclass(frozen=True, slots=True)
class InboundRecord:
    id: int
    session_key: str
    message: InboundMessage  # attachments without inline data
    received_at: float


class Store(Protocol):
    async def record_inbound(self, msg: InboundMessage, session_key: str) -> int | None:
        """Log an inbound message before it is run; its row id, or None for a redelivery."""
        ...

    async def session(self, key: str, *, fresh: bool = False) -> Session:
        """The current session for ``key``; ``fresh`` starts a new one (the old is kept)."""
        ...

    async def history(self, session: Session, limit: int | None = None) -> list[Message]:
        """The session's messages in order; with ``limit``, only the last ``limit``."""
        ...

    async def append_turn(self, turn: Turn) -> None:
        """Add a turn atomically and mark its inbound rows answered."""
        ...

    async def usage(self, session: Session) -> UsageTotals: ...

    async def unanswered(self) -> list[InboundRecord]:
        """Inbound messages logged but never answered (the process died mid-run)."""
        ...

    async def mark_answered(self, inbound_ids: Iterable[int]) -> None:
        """Mark inbound rows answered without a turn (e.g. the sender was told it was not run)."""
        ...

    async def traces(self, session_key: str | None = None, last: int = 20) -> list[TraceRecord]:
        """The last ``last`` traces (of one session, or all), oldest first, with spans."""
        ...

    async def close(self) -> None: ...
