"""What the dashboard reads and acts on, as small ports the composition root fills.

- ``DashboardStore``: the store's ports it reads (and the pairing and audit writes).
- ``Bot``: a running bot in this process (``chatgate run``): its run events, its active-run
  registry, the queue lengths, ``stop_run`` (``/stop`` from the page) and its channels.
  ``chatgate dashboard`` alone has none: the pages that need a live bot say so.
- ``Operations``: optional, read-only sources for the Operations page, each a one-method
  Protocol with a Protocol for its rows, passed when the bot has them (MCP servers, scheduled
  jobs, pending approvals); a missing one shows as "not configured". Jobs may also be
  paused, resumed and cancelled when their source is a ``JobControl`` (checked once, where
  the page is drawn and where an action arrives).
- ``PeoplePolicy``: the limits and owners the People page measures against.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from bot.agent.events import EventBus
from bot.channels import Channel
from bot.limits import LimitSettings
from bot.messages import Answer
from bot.runs import ActiveRun
from bot.store.base import ApprovedSender, PairingCode
from bot.store.reports import AuditStore, BrowseStore
from bot.tracing import TraceRecord


class DashboardStore(BrowseStore, AuditStore, Protocol):
    """Everything the dashboard asks of the store (``bot.dashboard.reads.Reads``)."""

    async def pending_pairings(self, now: float) -> list[PairingCode]: ...

    async def approve_pairing(self, code: str, now: float) -> PairingCode | None: ...

    async def deny_pairing(self, code: str, now: float) -> PairingCode | None: ...

    async def approved_senders(self, platform: str | None = None) -> list[ApprovedSender]: ...

    async def traces(self, session_key: str | None = None, last: int = 20) -> list[TraceRecord]: ...

    async def undelivered(self) -> list[Answer]: ...


class RunRegistry(Protocol):
    def runs(self) -> Iterable[ActiveRun]: ...


@dataclass(frozen=True, slots=True)
class Bot:
    """A bot running in this process, as the dashboard sees it."""

    events: EventBus
    registry: RunRegistry
    queued: Callable[[str], int]  # session key -> messages waiting in its lane
    stop_run: Callable[[str], Awaitable[bool]]  # run id -> stopped as /stop does (False: it had ended)
    channels: Mapping[str, Channel]
    model: str  # the model runs use


@dataclass(frozen=True, slots=True)
class PeoplePolicy:
    limits: LimitSettings = field(default_factory=LimitSettings)
    owners: tuple[str, ...] = ()  # platform:user_id


# -- the Operations page's sources ------------------------------------------------------
# The rows are read-only Protocols: a source may hand over its own records as they are (the MCP
# hub's ServerStatus, the approvals store's ApprovalRecord) when they have these attributes.


class McpServer(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def transport(self) -> str: ...  # stdio | http
    @property
    def state(self) -> str: ...  # connecting | ready | degraded | down
    @property
    def tools(self) -> int: ...
    @property
    def last_error(self) -> str | None: ...
    @property
    def since(self) -> float: ...  # time.time() of its last change of state


@runtime_checkable
class McpSource(Protocol):
    def mcp_status(self) -> Sequence[McpServer]: ...


class Job(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...  # reminder | task
    @property
    def rule(self) -> str: ...  # at / every / cron with its zone, in words
    @property
    def session_key(self) -> str: ...  # whose conversation it runs in
    @property
    def next_at(self) -> float | None: ...  # time.time() of its next occurrence
    @property
    def paused(self) -> bool: ...
    @property
    def text(self) -> str: ...  # the reminder's text or the task's input
    @property
    def warning(self) -> str: ...  # "" or why its messages may not reach the person (WhatsApp's 24-hour window)


class JobSource(Protocol):
    async def jobs(self) -> Sequence[Job]: ...


@runtime_checkable
class JobControl(Protocol):
    async def set_paused(self, job_id: str, paused: bool) -> bool:
        """False when there is no such job (any more)."""
        ...

    async def cancel_job(self, job_id: str) -> bool:
        """False when there is no such job (any more)."""
        ...


class Jobs(JobSource, JobControl, Protocol):
    """The scheduled jobs and the operator's changes to one."""


@runtime_checkable
class JobsPanel(Protocol):
    """A running capability whose jobs the Operations page lists (the schedules capability)."""

    def operator_jobs(self) -> Jobs: ...


class PendingApproval(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def requester(self) -> str: ...  # platform:user_id
    @property
    def session_key(self) -> str: ...  # the conversation whose run waits
    @property
    def asked_at(self) -> float: ...


class ApprovalSource(Protocol):
    async def pending_approvals(self) -> Sequence[PendingApproval]: ...


@dataclass(frozen=True, slots=True)
class Operations:
    mcp: McpSource | None = None
    jobs: JobSource | None = None
    approvals: ApprovalSource | None = None
