"""The other instances of this bot, as the core sees them (``bot.cluster`` implements it on
PostgreSQL; on SQLite there is none and nothing of this runs).

A session's lane is owned by one instance at a time. ``Peers`` is what the intake and the turn
runner ask of the cluster; ``Host`` is what the cluster asks of this instance's core when
another instance hands it work, or a stop, or when it takes over what a dead one owned.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from bot.channels.leases import Leases
from bot.limits import SharedRates
from bot.messages import Answer, InboundMessage
from bot.store.base import InboundRecord

Stopped = tuple[bool, int, tuple[int, ...]]  # (a run was stopped, queued messages dropped, inbound ids it answers)
Note = dict[str, Any]  # a small JSON object between instances (under PostgreSQL's 8,000 bytes of a NOTIFY)
Responder = Callable[[Note], Awaitable[Note]]


class Waiting(Protocol):
    """An approval whose run may wait on another instance (the approvals' ``ApprovalRecord``)."""

    @property
    def id(self) -> str: ...
    @property
    def session_key(self) -> str: ...  # the session whose run waits for it


class Peers(Protocol):
    async def claim(self, record: InboundRecord) -> bool:
        """Own the session's lane for this stored message: True to decide and run it here; False when
        another instance owns the lane (it was told and takes the message) or it was taken already."""
        ...

    async def own(self, session_key: str) -> None:
        """Hold the session's lane here for a turn with no stored message (a scheduled task):
        waits while another instance runs the session; ``idle`` gives it back afterwards."""
        ...

    def keeping(self, session_key: str) -> AbstractContextManager[None]:
        """Keep the session's lane here while a stop settles what it stopped (the lane, idle the
        moment its run ends, is not given back until then: nobody runs a stopped message again)."""
        ...

    def idle(self, session_key: str) -> None:
        """This instance's lane of the session has no work left: let another instance have it."""
        ...

    async def stop(self, session_key: str) -> Stopped | None:
        """Stop the session on the instance that owns it; None when this instance does (stop it here)."""
        ...

    async def stop_chat(self, platform: str, chat_id: str) -> int:
        """/stopall on every other instance; how many runs they stopped."""
        ...

    async def claim_answer(self, answer: Answer) -> bool:
        """Deliver this stored answer here? False when a live instance delivers it."""
        ...

    async def decide_elsewhere(self, record: Waiting, decision: str, msg: InboundMessage) -> str | None:
        """Decide an approval on the instance whose run waits for it; its answer (``LookupError``
        when no instance runs it)."""

    async def running_elsewhere(self, session_key: str) -> bool:
        """Another live instance runs this session now."""

    async def still_holds(self, session_key: str) -> bool:
        """The session's lane is still this instance's, now (checked in the database): False
        once another instance took it over (this one was paused past its lease), before a tool
        with side effects acts for a turn that is no longer this instance's."""
        ...

    async def sweep(self) -> None:
        """Take over what no live instance holds: sessions whose messages wait, answers owed."""
        ...


class Joined(Peers, Leases, SharedRates, Protocol):
    """This instance joined to the others, as a capability's ``CapabilitySpec.join`` gives it
    (the cluster's, on PostgreSQL): ``Peers`` for the intake and the turn runner, and what the
    rest of the core asks of it: the channels' leases (``bot.channels.Leases``), the per-person
    rate shared by every instance (``bot.limits.SharedRates``), the sweeps capabilities add."""

    async def start(self, host: Host) -> None:
        """Join once the core is built: heartbeat, bus; ``host`` takes what other instances hand over."""
        ...

    def add_sweep(self, sweep: Callable[[], Awaitable[None]]) -> None:
        """Run ``sweep`` after each heartbeat's own (take over what dead instances claimed)."""
        ...


class Host(Protocol):
    """This instance's core, for the cluster."""

    async def take(self, record: InboundRecord) -> None:
        """Decide and run a stored message whose session this instance now owns."""
        ...

    async def stop_here(self, session_key: str) -> Stopped:
        """/stop of a session this instance runs, asked by another instance."""
        ...

    async def stop_chat_here(self, platform: str, chat_id: str) -> int:
        ...

    def busy(self, session_key: str) -> bool:
        """The session's lane here still has work."""
        ...

    def abandon(self, session_key: str) -> None:
        """The session's lane was lost to another instance (this one could not renew it): end it
        here without answering; its new owner runs what is unanswered."""
        ...

    def deliver(self, answer: Answer) -> None:
        """Send a stored answer a dead instance owed."""
        ...

    async def decide_here(self, approval_id: str, decision: str, msg: InboundMessage) -> str | None:
        """A press (or /approve) another instance received, for an approval a run here waits for."""
        ...


@runtime_checkable
class Asks(Protocol):
    """Optional, of ``Peers``: a capability's own questions to the other instances (the
    dashboard's board of every instance's runs, its Stop of a run running elsewhere)."""

    @property
    def instance(self) -> str:
        """This instance's name."""
        ...

    def respond(self, kind: str, answer: Responder) -> None:
        """Answer the questions of ``kind`` other instances ask this one (a name of the capability's,
        such as ``dashboard.stop``) with ``answer``."""
        ...

    async def ask(self, kind: str, body: Note, *, to: str | None = None, timeout: float = 2.0) -> list[Note]:
        """Ask one instance (``to``), or every other live one (None); the answers that came within
        ``timeout`` seconds, each with ``from`` (the instance that answered)."""
        ...
