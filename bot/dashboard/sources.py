"""What the dashboard reads and acts on, as small ports the composition root fills.

- ``DashboardStore``: the store's ports it reads (and the pairing and audit writes).
- ``Bot``: a running bot in this process (``chatgate run``): its run events, its active-run
  registry, the queue lengths, ``stop_run`` (``/stop`` from the page) and its channels.
  ``chatgate dashboard`` alone has none: the pages that need a live bot say so.
- ``Operations``: optional, read-only sources for the Operations page, each a one-method
  Protocol with its own row type, passed when the bot has them (MCP servers, scheduled
  jobs, pending approvals); a missing one shows as "not configured". Jobs may also be
  paused, resumed and cancelled when their source is a ``JobControl`` (checked once).
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
from bot.store.base import AuditStore, BrowseStore, PairingStore
from bot.tracing import TraceRecord


class DashboardStore(BrowseStore, AuditStore, PairingStore, Protocol):
    """Everything the dashboard asks of the store."""

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


@dataclass(frozen=True, slots=True)
class McpServer:
    name: str
    transport: str  # stdio | http
    state: str  # connecting | ready | degraded | down
    tools: int
    last_error: str | None = None
    since: float = 0.0  # time.time() of its last change of state


class McpSource(Protocol):
    def mcp_status(self) -> Sequence[McpServer]: ...


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    kind: str  # reminder | task
    rule: str  # at / every / cron, in words
    where: str  # the session key it runs for
    next_at: float | None = None  # time.time() of its next occurrence
    paused: bool = False
    text: str = ""  # the reminder's text or the task's input


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


@dataclass(frozen=True, slots=True)
class PendingApproval:
    id: str
    tool: str
    requester: str  # platform:user_id
    where: str  # the session key of the run that waits
    asked_at: float = 0.0


class ApprovalSource(Protocol):
    async def pending_approvals(self) -> Sequence[PendingApproval]: ...


@dataclass(frozen=True, slots=True)
class Operations:
    mcp: McpSource | None = None
    jobs: JobSource | None = None
    approvals: ApprovalSource | None = None
