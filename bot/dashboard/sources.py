"""What the dashboard reads and acts on, as small ports the composition root fills.

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

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from bot.agent.events import EventBus
from bot.capabilities.panels import (  # noqa: F401 - where the pages found them
    ApprovalSource,
    Job,
    JobControl,
    Jobs,
    JobSource,
    JobsPanel,
    McpServer,
    McpSource,
    PendingApproval,
)
from bot.channels import Channel
from bot.limits import LimitSettings
from bot.runs import ActiveRun


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


@dataclass(frozen=True, slots=True)
class Operations:
    mcp: McpSource | None = None
    jobs: JobSource | None = None
    approvals: ApprovalSource | None = None
