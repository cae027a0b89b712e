"""What a running capability hands the dashboard's Operations page, found by ``McpSource``,
``JobsPanel`` and ``ApprovalSource``, never by name: read-only rows as Protocols, so a source may
hand over its own records as they are (the MCP hub's ``ServerStatus``, the approvals'
``ApprovalRecord``). In the core, so that the dashboard and those capabilities never import each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


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


@runtime_checkable
class ApprovalSource(Protocol):
    """A running capability whose waiting approvals the Operations page lists (the approvals capability)."""

    async def pending_approvals(self) -> Sequence[PendingApproval]: ...
