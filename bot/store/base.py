"""The Store port: sessions, their history, the inbound log and usage.

Small ports sit beside it: ``PairingStore`` (pairing codes and approved senders, for
``bot.access``, ``chatgate pairing`` and the dashboard), ``AnswerStore`` (what is owed to
chats and which chunks were delivered, for ``bot.delivery``), ``CompactingStore`` (it with
compaction's summaries and cuts), ``ModelStore`` (a conversation's model, session titles),
``NoteStore`` (what a chat or a person was told once, whichever instance told it), and
``StepStore`` (a capability's own operations and tables: the dashboard's reads are
``bot.dashboard.reads``, the approvals' ``bot.approvals.ledger``). ``AppStore`` is all of them
on one object, what the composition root opens; ``SQLiteStore`` (``bot.store.sqlite``) and
``PostgresStore`` (``bot.store.pg``) implement it and pass one contract suite (tests/test_store_contract.py).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from bot.conversation import Conversation
from bot.errors import ChatgateError
from bot.llm import Message
from bot.messages import Answer, InboundMessage
from bot.providers.base import Usage
from bot.store.schema_steps import StepStore
from bot.tracing import TraceRecord


@dataclass(frozen=True, slots=True)
class Session:
    id: int
    key: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Charge:
    """What model calls cost one person (``platform:user_id``), for the daily budgets."""

    person: str
    tokens: int  # in + out
    cost: float


class LaneLost(ChatgateError):
    """``append_turn`` refused a turn: its session's lane is no longer this instance's (it was
    paused past its lease and another instance took the session over). Nothing of the turn was
    stored; the new holder answers its messages."""


# more of a turn's writes, given by whoever started it (a capability's operation, ``bot.store.op``): given
# the commit's time, run in the turn's transaction after its own writes
TurnWrite: TypeAlias = Callable[[float], Generator[Any, Any, object]]


@dataclass(frozen=True, slots=True)
class Turn:
    """Everything one run adds to a session, written in one transaction.

    ``messages`` are in order: the user message(s), assistant and tool messages, the
    final answer. ``answer`` (the rendered reply owed to the chat) is stored with it;
    ``settle`` marks ``inbound_ids`` answered at once (a silent run: nothing to deliver).
    Otherwise they are answered when the answer's last chunk is delivered, or stay
    unanswered (a run cancelled by shutdown, answered again after the restart). ``also`` are
    the writes of whoever started the turn, in the same transaction (a capability's work
    that ends with the turn, so that a restart never does it again)."""

    session: Session
    run_id: str
    messages: tuple[Message, ...]
    usage: Usage = Usage()
    cost: float = 0.0
    model: str = ""
    inbound_ids: tuple[int, ...] = ()
    trace: TraceRecord | None = None
    answer: Answer | None = None
    settle: bool = False
    charges: tuple[Charge, ...] = ()  # this turn's own model calls, per person it served (not its sub-agents')
    also: tuple[TurnWrite, ...] = ()


@dataclass(frozen=True, slots=True)
class UsageTotals:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    turns: int = 0


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message with its store id, the handle a compaction cuts at."""

    id: int
    message: Message


@dataclass(frozen=True, slots=True)
class Summary:
    """A compaction: ``text`` stands for the session's messages up to ``through_id``."""

    text: str
    through_id: int
    messages: int  # how many messages it replaced (the previous summary's included)
    tokens_before: int  # the history's tokens before and after
    tokens_after: int
    run_id: str = ""
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Recent:
    """What a run starts from, read at once: the session's latest summary, its newest live
    messages (oldest first), and how many live messages it has in all."""

    summary: Summary | None
    messages: list[Message]
    live: int


@dataclass(frozen=True, slots=True)
class InboundRecord:
    id: int
    session_key: str
    message: InboundMessage  # attachments without inline data
    received_at: float


SessionOf: TypeAlias = Conversation | str  # whose session: a conversation, or its session key as text


def key_of(of: SessionOf) -> str:
    """The session key a store keeps: the store turns a conversation into text here, at its edge."""
    return of if isinstance(of, str) else of.session_key


class Store(Protocol):
    async def record_inbound(self, msg: InboundMessage, of: SessionOf) -> int | None:
        """Log an inbound message of a conversation before it is run; its row id, or None for a redelivery."""
        ...

    async def session(self, of: SessionOf, *, fresh: bool = False) -> Session:
        """The current session of a conversation; ``fresh`` starts a new one (the old is kept)."""
        ...

    async def history(self, session: Session) -> list[Message]:
        """The session's live (not compacted) messages in order."""
        ...

    async def append_turn(self, turn: Turn) -> None:
        """Add a turn atomically, with its answer; with ``settle``, mark its inbound rows answered."""
        ...

    async def update_inbound(self, inbound_id: int, msg: InboundMessage) -> None:
        """Replace a stored message (its attachments now carry their saved paths)."""
        ...

    async def forget_inbound(self, inbound_id: int) -> None:
        """Keep only the dedupe key and time of a refused or ignored message; answered."""
        ...

    async def keep_as_context(self, inbound_id: int) -> None:
        """A group message that did not address the bot: answered, and pruned with
        ``prune_context`` once older than the retention."""
        ...

    async def prune_context(self, before: float) -> int:
        """Delete the group context messages received before ``before`` (epoch seconds) and the
        refused ones' week-old dedupe keys; how many rows went."""
        ...

    async def usage(self, session: Session) -> UsageTotals: ...

    async def usage_since(self, person: str, since: float) -> tuple[int, float]:
        """(tokens in + out, cost) charged to ``person`` since ``since`` (epoch seconds): every
        model call of the runs and compactions that served them, each counted once."""
        ...

    async def bot_usage_since(self, since: float) -> tuple[int, float]:
        """(tokens, cost) charged to everyone since ``since``: the whole bot's spending."""
        ...

    async def unanswered(self) -> list[InboundRecord]:
        """Inbound messages logged but never answered and owed no stored answer (the process
        died before the run finished); forgotten rows older than a week are pruned first."""
        ...

    async def mark_answered(self, inbound_ids: Iterable[int]) -> None:
        """Mark inbound rows answered without a turn (e.g. the sender was told it was not run)."""
        ...

    async def traces(self, session_key: str | None = None, last: int = 20) -> list[TraceRecord]:
        """The last ``last`` traces (of one session, or all), oldest first, with spans."""
        ...

    async def close(self) -> None: ...


class CompactingStore(Store, Protocol):
    """The Store with compaction's side: the live messages with their ids, the current summary,
    and saving a summary together with its cut. What the agent core is given."""

    async def live_messages(self, session: Session) -> list[StoredMessage]:
        """Like ``Store.history``, with each message's id."""
        ...

    async def live_count(self, session: Session) -> int:
        """How many messages are not compacted."""
        ...

    async def recent(self, session: Session, limit: int) -> Recent:
        """In one read: the latest summary, the last ``limit`` live messages and the live count."""
        ...

    async def summary(self, session: Session) -> Summary | None:
        """The latest summary of the session, or None."""
        ...

    async def save_summary(self, session: Session, summary: Summary) -> bool:
        """In one transaction: store the summary and mark the session's messages up to
        ``summary.through_id`` compacted (kept, never deleted). False, and nothing
        changed, when a summary through that id or a later one exists already."""
        ...


@dataclass(frozen=True, slots=True)
class PairingCode:
    """A pairing request: ``code`` lets ``user_id`` on ``platform`` in once the owner approves it."""

    code: str
    platform: str
    user_id: str
    user_name: str
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class ApprovedSender:
    platform: str
    user_id: str
    name: str
    approved_at: float


class PairingStore(Protocol):
    """Pairing codes and the senders they let in. ``bot.access`` uses ``pairing_request`` and
    ``is_approved``; the ``chatgate pairing`` commands and the dashboard the rest."""

    async def pairing_request(
        self, platform: str, user_id: str, name: str, *, now: float, ttl: float = 3600.0, max_pending: int = 3,
        origin: str | None = None,
    ) -> PairingCode | None:
        """The sender's unexpired code, else a new one, else None: ``max_pending`` unexpired,
        unapproved codes of the same ``origin`` (where requests come from, e.g. a platform and
        bot account; by default the platform) already wait. A code is never dropped before it
        expires, so throwaway accounts cannot push out a code someone is waiting on; they can
        only make the next stranger of their origin try again later."""
        ...

    async def pending_pairings(self, now: float) -> list[PairingCode]:
        """Unexpired, unapproved codes, oldest first."""
        ...

    async def approve_pairing(self, code: str, now: float) -> PairingCode | None:
        """Approve a pending code (any case); None when it is unknown, expired or used."""
        ...

    async def deny_pairing(self, code: str, now: float) -> PairingCode | None:
        """Drop a pending code unapproved (any case); None when it is unknown, expired or used.
        Its sender is not blocked: writing again later asks anew, with a new code."""
        ...

    async def revoke_sender(self, platform: str, user_id: str) -> bool:
        """Forget an approval; False when the sender was not approved."""
        ...

    async def is_approved(self, platform: str, user_id: str) -> bool: ...

    async def approved_senders(self, platform: str | None = None) -> list[ApprovedSender]:
        """Approved senders (of one platform, or all), in order of approval."""
        ...


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model a conversation's people picked with /model."""

    model: str  # a name in models:
    chosen_by: str  # platform:user_id
    chosen_at: float


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session as ``chatgate sessions`` lists it."""

    key: str
    id: int
    created_at: float
    archived_at: float | None
    title: str | None
    model: str | None  # the model its conversation picked (None: the default)
    last_at: float | None  # its last turn


class ModelStore(Protocol):
    """Model choice per conversation (by session key: it outlives /new) and session titles."""

    async def chosen_model(self, session_key: str) -> ModelChoice | None:
        ...

    async def choose_model(self, session_key: str, choice: ModelChoice | None) -> None:
        """Store the conversation's choice; None forgets it (back to the default)."""
        ...

    async def set_title(self, session: Session, title: str, model: str) -> bool:
        """Store the session's title; False when it has one already (the first stays)."""
        ...

    async def title(self, session: Session) -> str | None:
        ...

    async def titled_sessions(self, last: int = 20, *, archived: bool = False) -> list[SessionInfo]:
        """The sessions most recently used first (not sub-agents'); ``archived`` adds those /new left."""
        ...


@runtime_checkable
class NoteStore(Protocol):
    """What a chat or a person has been told once, remembered by every instance (the fallback's
    "answered by" line, "over your limit")."""

    async def first_note(self, subject: str, note: str, until: float | None, now: float) -> bool:
        """True when ``note`` is due for ``subject`` (never told, or told until before ``now``): it is
        recorded as told until ``until`` (None: for good). False when it was told and still holds."""
        ...


class AnswerStore(Protocol):
    """What is owed to chats: an answer is stored before its first chunk is sent, each chunk
    is recorded when the platform took it, and the last one answers the inbound rows."""

    async def store_answer(self, answer: Answer) -> None:
        """Store an answer outside a turn (a notice); storing it again changes nothing."""
        ...

    async def undelivered(self) -> list[Answer]:
        """Answers not fully delivered, oldest first, ``sent`` counting their delivered chunks."""
        ...

    async def chunk_sent(self, answer: Answer, index: int, message_id: str | None) -> None:
        """Record a delivered chunk; the last one marks the answer delivered and its inbound
        rows answered, in the same transaction."""
        ...

    async def give_up(self, answer: Answer) -> None:
        """Stop owing an answer that cannot be delivered; its inbound rows count as answered."""
        ...

    async def answer_state(self, answer_id: str) -> AnswerState | None:
        """Where a stored answer stands; None when there is no answer with this id."""
        ...

    async def sent_as(self, platform: str, message_id: str) -> tuple[Answer, int] | None:
        """The stored answer whose chunk ``platform`` took as ``message_id``, and that chunk's index."""
        ...


AnswerState = Literal["owed", "delivered", "given_up"]


class AppStore(CompactingStore, AnswerStore, PairingStore, ModelStore, NoteStore, StepStore, Protocol):
    """Every store port on one object: what the composition root opens and hands out
    (``SQLiteStore``, ``PostgresStore``)."""
