"""The Tool port: a typed async function, its JSON schema, and the context it runs in.

A tool is written as ``async def read_file(ctx: ToolContext, path: str, ...) -> str``
and decorated with ``@tool(category=...)``: the signature becomes the JSON schema, the
docstring's first paragraph the description (see ``bot.tools.schema``). A failure the
model should read and react to is raised as ``ToolError``; anything else is a bug.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias

from bot.conversation import Conversation
from bot.errors import ChatgateError
from bot.llm import ImagePart
from bot.messages import ChatType
from bot.providers.base import ToolSpec, Usage
from bot.tools.policy import ToolPolicy
from bot.tools.schema import schema_from_function

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what OpenAI and Anthropic both accept


@dataclass(frozen=True, slots=True)
class SubAgentRun:
    """What one sub-agent run did, for its parent's trace: ``TraceBuilder.sub_agent`` takes it."""

    session_key: str
    run_id: str
    status: str  # a RunStatus value
    text: str  # its answer, or its error sentence
    usage: Usage
    cost: float
    started: float  # time.time()
    seconds: float


class HeldTools(Protocol):
    """The tools a run holds back until it asks for them (``mcp_tool_search`` finds and
    enables them): what is held, and enabling some by name (offered from the next step on)."""

    def held(self) -> tuple[Tool, ...]: ...

    def enable(self, names: Sequence[str]) -> tuple[Tool, ...]: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who a tool runs for and where: every tool call gets one.

    ``on_sub_agent`` is how the run that owns this context learns what a sub-agent
    started by a tool cost: the loop passes a function that adds it to its trace.
    ``tool_policy`` is the run's policy, which a sub-agent's tools are narrowed by too.
    ``held`` is the run's tools held back until enabled (None: the run holds none back)."""

    workspace: Path  # the conversation's workspace, ready
    conversation: Conversation
    run_id: str
    agent_id: str
    user_id: str  # whom the run acts for: the last sender of its turn (a job's creator)
    sender_is_owner: bool = False  # every person of the turn is an owner (gates exec)
    on_sub_agent: Callable[[SubAgentRun], None] | None = field(default=None, compare=False, repr=False)
    tool_policy: ToolPolicy | None = None
    payers: tuple[str, ...] = ()  # whom the run's model calls are charged to; a sub-agent's too
    gate: Gate | None = field(default=None, compare=False, repr=False)  # hooks and approvals, before each call
    on_approval: Callable[[str, float, str], None] | None = field(default=None, compare=False, repr=False)
    held: HeldTools | None = field(default=None, compare=False, repr=False)
    users: tuple[str, ...] = ()  # every person the turn acts for (user ids), ``user_id`` last; () = ``user_id``
    unattended: bool = False  # no person can answer an approval (the memory flush, a task's check)

    @property
    def people(self) -> tuple[str, ...]:
        """Every user id the turn acts for: it acts with the least rights among them."""
        return self.users or ((self.user_id,) if self.user_id else ())

    @property
    def session_key(self) -> str:
        return self.conversation.session_key

    @property
    def platform(self) -> str:
        return self.conversation.platform

    @property
    def chat_type(self) -> ChatType:
        return self.conversation.chat_type

class Gate(Protocol):
    """A step of the gate between a checked call and its tool (``bot.tools.gate``): a capability's
    (``bot.hooks``, ``bot.approvals``)."""

    async def permit(self, ctx: ToolContext, tool: Tool, call_id: str, arguments: Mapping[str, Any]) -> str | None:
        """None to run the call; else the sentence the model reads instead of a result."""


class ToolCategory(StrEnum):
    """What a tool touches; decides its default timeout."""

    FILE = "file"
    EXEC = "exec"
    NETWORK = "network"
    AGENT = "agent"  # runs a sub-agent
    MCP = "mcp"  # a tool of an MCP server (each server's ``call_timeout`` is its tools' own ``timeout``)
    OTHER = "other"


DEFAULT_TIMEOUTS: Mapping[ToolCategory, float] = MappingProxyType({
    ToolCategory.FILE: 30.0,
    ToolCategory.EXEC: 600.0,
    ToolCategory.NETWORK: 120.0,
    ToolCategory.AGENT: 900.0,
    ToolCategory.MCP: 120.0,
    ToolCategory.OTHER: 60.0,
})


NOTHING = "(the tool returned nothing)"  # a tool's whole output when it said nothing (an empty MCP result)


class ToolError(ChatgateError):
    """A tool failed in a way the model should read (not a bug): the message is the result."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returns when text is not enough: the text, and images the model is shown
    after the step's results (an MCP tool's image content)."""

    text: str
    images: tuple[ImagePart, ...] = ()


ToolFunction: TypeAlias = Callable[..., Awaitable[str | ToolOutput]]  # (ctx: ToolContext, **arguments)


@dataclass(frozen=True)
class Tool:
    """One tool: what the model is told (name, description, schema) and what runs.

    ``function`` is called as ``await function(ctx, **arguments)`` with arguments that
    passed the schema; ``spec`` is built once, here, never per call. ``timeout`` overrides
    the registry's timeout of the category (an MCP server's ``call_timeout``)."""

    name: str
    description: str
    category: ToolCategory
    parameters: dict[str, Any]  # JSON schema of the arguments object
    function: ToolFunction = field(repr=False)
    approval: Literal["ask", "never"] | None = None  # declared by its source (an MCP server); None: the rules'
    timeout: float | None = None
    spec: ToolSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_NAME.pattern}")
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name}: parameters must be a JSON schema of type 'object'")
        object.__setattr__(self, "spec", ToolSpec(self.name, self.description, self.parameters))


def tool(*, category: ToolCategory, name: str | None = None) -> Callable[[ToolFunction], Tool]:
    """Turn a typed async function into a ``Tool``; the schema is built here, once.

    ``name`` defaults to the function's name. Unsupported parameter types, a missing
    docstring or a first parameter that is not ``ctx: ToolContext`` fail at import time.
    """
    def decorate(function: ToolFunction) -> Tool:
        description, parameters = schema_from_function(function, context_type=ToolContext)
        return Tool(name or function.__name__, description, ToolCategory(category), parameters, function)

    return decorate
