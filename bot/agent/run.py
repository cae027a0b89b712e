"""What a run of the agent is asked (``RunRequest``), how it is set up (``AgentSettings``), what
it has produced so far while it runs (``RunState``) and what it gives back (``RunResult`` with
its ``RunStatus``); the loop (``bot.agent.loop``) runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from bot.agent.compaction import CompactionSettings
from bot.agent.guard import GuardMode
from bot.agent.prompt import PromptMode
from bot.conversation import Conversation
from bot.limits import Bill
from bot.llm import Message, Role, ToolCall, ToolResult
from bot.messages import InboundMessage
from bot.providers.base import Usage
from bot.routing import Route
from bot.store.base import Session, Turn
from bot.tools.policy import ToolPolicy
from bot.tracing import TraceBuilder

PostRunHook = Callable[["RunRequest", "RunResult"], Awaitable[None]]
Notify = Callable[[str], Awaitable[None]]  # a note the chat is owed before the answer (stored and queued)


class RunStatus(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    SILENT = "silent"


@dataclass(frozen=True, slots=True)
class RunRequest:
    run_id: str
    session: Session
    conversation: Conversation
    inbound: tuple[InboundMessage, ...]  # one, or several collected while busy; () for a ``task``
    inbound_ids: tuple[int, ...] = ()
    task: str = ""  # a turn with no inbound message (a sub-agent's task, a scheduled job): its text
    user_id: str = ""  # whom the run acts for (the last sender; a task's owner), for the tools
    users: tuple[str, ...] = ()  # every person it acts for (a task's); () = the senders of ``inbound``
    context: tuple[InboundMessage, ...] = ()  # group messages since the bot last spoke
    sender_is_owner: bool = False  # every message in ``inbound`` comes from an owner (access.is_owner)
    tool_policy: ToolPolicy | None = None  # which tools this chat may use (None: every registered tool)
    payers: tuple[str, ...] = ()  # whom its model calls are charged to ("platform:user_id"), split evenly
    prompt_mode: PromptMode | None = None  # overrides the agent's setting for this run (a scheduled task's)
    notify: Notify | None = None  # where a fallback's note goes (the turn runner owes it to the chat)

    @property
    def session_key(self) -> str:
        return self.conversation.session_key

    @property
    def acting_for(self) -> str:
        """The user id the run's tools act for."""
        return self.user_id or (self.inbound[-1].sender.id if self.inbound else "")

    @property
    def people(self) -> tuple[str, ...]:
        """Every user id the run acts for, each once, ``acting_for`` last: the senders of a batch
        collected while busy, a task's people. The run has the least rights among them."""
        if self.users:
            return self.users
        if self.inbound:
            return senders(self.inbound)
        return (self.acting_for,) if self.acting_for else ()


def senders(msgs: Sequence[InboundMessage]) -> tuple[str, ...]:
    """The user ids of a batch's senders, each once, the last sender last."""
    if not msgs:
        return ()
    last = msgs[-1].sender.id
    return (*dict.fromkeys(m.sender.id for m in msgs if m.sender.id != last), last)


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    status: RunStatus
    route: Route  # the model that answered
    text: str = ""  # the final answer, Markdown; empty when silent
    usage: Usage = Usage()
    cost: float = 0.0
    iterations: int = 0
    error: str | None = None  # one sentence for the user when status is failed
    prompt_tokens: int = 0  # the last request's prompt (provider-reported where given), for compaction
    turn: Turn | None = None  # what the run adds to its session, not stored yet (None: stored, cancelled)
    live_messages: int | None = None  # the session's live messages with this turn's (None: not read)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    agent_id: str
    provider: str
    model: str
    max_tokens: int = 4096
    max_iterations: int = 20
    context_window: int = 128_000
    max_message_chars: int = 32_768
    history_turns: int = 40
    guard: GuardMode = GuardMode.WARN
    system_prompt: str | None = None  # extra instructions appended to the built prompt
    owners: tuple[str, ...] = ()
    compaction: CompactionSettings = CompactionSettings()
    max_tool_calls_per_step: int = 16  # calls of one step beyond this get an error result, not run
    prompt_mode: PromptMode = "full"  # sub-agents: "minimal"


@dataclass
class RunState:
    """What one run has produced so far; enough to store a valid turn at any moment."""

    request: RunRequest
    trace: TraceBuilder
    bill: Bill  # the trace charges it; the turn stores its charges
    route: Route  # the model the run calls now
    fallbacks: tuple[Route, ...] = ()  # what it may still move to, in order
    announced: bool = False  # a fallback's first answer has been announced
    new: list[Message] = field(default_factory=list)  # the turn: user, assistant, tool...
    streamed: list[str] = field(default_factory=list)  # text of the LLM call in flight
    pending: tuple[ToolCall, ...] = ()  # calls of the last assistant message without results
    done: dict[str, ToolResult] = field(default_factory=dict)
    iterations: int = 0
    prompt_tokens: int = 0  # of the last request sent
    live: int | None = None  # the session's live messages before this run, once read

    def use(self, route: Route) -> None:
        self.route = route
        self.trace.model, self.trace.why = route.spec.model, route.why_text

    def close_pending(self, text: str) -> None:
        """Answer every call still without a result, so the history stays valid."""
        if self.pending:
            self.new.append(Message(Role.TOOL, tuple(self.done.get(c.id) or ToolResult(c.id, text, is_error=True)
                                                     for c in self.pending)))
            self.pending = ()
