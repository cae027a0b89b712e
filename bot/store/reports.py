"""What the dashboard reads (sessions, their logs, usage by day, failures) and keeps (who did
what from it), as its pages take them; the dashboard's own operations (``bot.dashboard.reads``)
run on the one store and make them."""

from __future__ import annotations

from dataclasses import dataclass

from bot.llm import Message
from bot.store.base import Summary


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session as the dashboard lists it."""

    id: int
    key: str
    created_at: float
    archived: bool  # replaced by a fresh session (/new); kept
    last_activity: float  # its newest message, else its creation
    title: str  # the start of its first user message (or of the message waiting for its first turn)
    sender: str  # the name of the last person who wrote in it ("" when unknown)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    turns: int = 0


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """A stored message of a session, compacted ones included (they are kept, marked)."""

    id: int
    run_id: str
    message: Message
    created_at: float
    compacted: bool


@dataclass(frozen=True, slots=True)
class SessionLog:
    """A session's newest messages (oldest first) and every summary that replaced some of them."""

    session: SessionSummary
    messages: list[LoggedMessage]
    summaries: list[Summary]
    earlier: int  # messages older than the first one here, left out


@dataclass(frozen=True, slots=True)
class DailyUsage:
    """What one person's model calls cost on one UTC day (``day``: its 00:00, epoch seconds)."""

    person: str
    day: float
    tokens: int
    cost: float


@dataclass(frozen=True, slots=True)
class UsageReport:
    days: list[DailyUsage]
    names: dict[str, str]  # person -> the name they last wrote under, where one is known


@dataclass(frozen=True, slots=True)
class Failure:
    """Something that went wrong recently: a run that failed, or an answer given up."""

    at: float
    kind: str  # run | delivery
    where: str  # the session key, or platform:chat_id
    detail: str
    run_id: str = ""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One thing done from the dashboard (or tried and refused), and who did it."""

    at: float
    user: str
    role: str
    action: str  # login | logout | stop | approve | deny | pause | cancel ...
    target: str  # what it was done to: a run id, a pairing code's sender, a job id
    outcome: str  # done | refused: ... | not found | failed
    address: str = ""  # where the request came from
