"""A task's check: something cheap run before the model that says whether there is anything
to do ("tell me only if the build failed"), so an occurrence with nothing to do costs no
model call.

A check is stored as JSON with its ``kind``. Two kinds:

- ``command``: a shell command run as ``exec`` runs it (the same sandbox and bounds, in the
  job's workspace, no secret of the bot's, through the same gate: the pre-tool hooks see it as
  a call of ``exec``), with the check's timeout. Exit 0 with output runs
  the model, the output shown to it; exit 0 with no output, or exit 1, skips the model for
  that occurrence; any other exit, a timeout or a command that cannot start is a failed run.
- ``mcp``: a call of an MCP tool (``mcp__<server>__<tool>`` and its arguments), as the job's
  creator, through the same gate as a run's calls, with the check's timeout. A result with
  text runs the model, the text shown to it; an empty one skips the model; an error result,
  a timeout, or a tool that is not there (its server down), that a hook refuses or that
  needs an approval is a failed run.

A kind is one dataclass with its ``KIND``, ``from_json`` and ``json``, in ``KINDS``, and its
runner registered on ``Checks`` (``checks.register(kind, runner)``): the scheduler and the
store do not change.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from bot.conversation import Conversation
from bot.tools.approval import ApprovalRules
from bot.tools.base import NOTHING, Tool, ToolContext, ToolError, ToolOutput
from bot.tools.exec import run_shell
from bot.tools.policy import ToolPolicy
from bot.tools.sandbox import ExecSettings

log = logging.getLogger(__name__)

OUTPUT_CHARS = 4000  # of a check's output shown to the model
MAX_COMMAND = 2000


@dataclass(frozen=True, slots=True)
class CheckResult:
    """``go``: run the model (``output`` goes with the task); else skip it, or, with ``error``,
    count the occurrence as a failed run."""

    go: bool
    output: str = ""
    error: str = ""


class Check(Protocol):
    KIND: ClassVar[str]

    def json(self) -> str: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class CommandCheck:
    """A shell command, run in the sandbox like ``exec``."""

    KIND: ClassVar[str] = "command"
    command: str

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise ValueError("a check command cannot be empty")
        if len(self.command) > MAX_COMMAND:
            raise ValueError(f"a check command is at most {MAX_COMMAND} characters")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CommandCheck:
        return cls(str(data["command"]))

    def json(self) -> str:
        return json.dumps({"kind": self.KIND, "command": self.command}, ensure_ascii=False)

    def describe(self) -> str:
        return f"check `{self.command}`"


@dataclass(frozen=True, slots=True)
class McpCheck:
    """A call of an MCP tool, by the name the model knows it by, with its arguments (a JSON object)."""

    KIND: ClassVar[str] = "mcp"
    tool: str
    arguments: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.tool.startswith("mcp__"):
            raise ValueError("a check tool is an MCP tool: mcp__<server>__<tool>")
        if len(json.dumps(self.arguments)) > MAX_COMMAND:
            raise ValueError(f"a check tool's arguments are at most {MAX_COMMAND} characters of JSON")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> McpCheck:
        return cls(str(data["tool"]), dict(data.get("arguments") or {}))

    def json(self) -> str:
        return json.dumps({"kind": self.KIND, "tool": self.tool, "arguments": dict(self.arguments)},
                          ensure_ascii=False)

    def describe(self) -> str:
        return f"check {self.tool}({json.dumps(dict(self.arguments), ensure_ascii=False)})"


def mcp_check(tool: str, arguments: str) -> McpCheck:
    """The check the schedule tool was given: ``arguments`` a JSON object (or empty)."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"check_arguments is not JSON: {exc.msg}") from None
    if not isinstance(parsed, dict):
        raise ValueError("check_arguments must be a JSON object")
    return McpCheck(tool.strip(), parsed)


KINDS: dict[str, Callable[[Mapping[str, Any]], Check]] = {CommandCheck.KIND: CommandCheck.from_json,
                                                          McpCheck.KIND: McpCheck.from_json}
CheckRunner = Callable[[ToolContext, Any], Awaitable[CheckResult]]  # (context, a check of its kind)


def parse_check(raw: str) -> Check:
    """A stored check; ``ValueError`` for one this version does not know."""
    data = json.loads(raw)
    kind = data.get("kind", CommandCheck.KIND)
    if kind not in KINDS:
        raise ValueError(f"unknown check kind {kind!r}")
    return KINDS[kind](data)


class Checks:
    """The runners of the check kinds, by kind (a plain registry)."""

    def __init__(self) -> None:
        self._runners: dict[str, CheckRunner] = {}

    def register(self, kind: str, runner: CheckRunner) -> None:
        self._runners[kind] = runner

    def runs(self, check: Check) -> bool:
        return check.KIND in self._runners

    async def run(self, ctx: ToolContext, check: Check) -> CheckResult:
        runner = self._runners.get(check.KIND)
        if runner is None:
            return CheckResult(False, error=f"checks of kind {check.KIND} cannot run here")
        return await runner(ctx, check)


async def gated(ctx: ToolContext, tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """The one gate (hooks, approvals) for a check's call, as a run's calls pass it; why it may
    not run, or None. Nobody can answer an approval when a check runs: such a call is not run."""
    if ctx.gate is None:
        return None
    refusal = await ctx.gate.permit(ctx, tool, ctx.run_id, arguments)
    if refusal is not None:
        log.warning("check refused by the gate session=%s run=%s: %s", ctx.session_key, ctx.run_id, refusal[:200])
    return refusal


def command_runner(settings: ExecSettings, timeout: float, exec_tool: Tool | None = None) -> CheckRunner:
    """The ``command`` kind, run like ``exec`` (its sandbox and bounds, and its gate: the call is
    ``exec_tool``'s to the hooks and approvals) for at most ``timeout`` s."""

    async def run(ctx: ToolContext, check: CommandCheck) -> CheckResult:
        if exec_tool is not None and (refusal := await gated(ctx, exec_tool, {"command": check.command})):
            return CheckResult(False, error=refusal)
        try:
            end = await run_shell(ctx, check.command, timeout, settings)
        except ToolError as exc:
            return CheckResult(False, error=f"the check could not start: {exc}")
        if end.timed_out:
            return CheckResult(False, error=f"the check did not finish within {timeout:g} s")
        if end.sandbox_failed:
            return CheckResult(False, error="the check's sandbox could not start (bubblewrap failed)")
        if end.code == 1 or (end.code == 0 and not end.output.strip()):
            log.info("check says nothing to do session=%s run=%s", ctx.session_key, ctx.run_id)
            return CheckResult(False)
        if end.code != 0:
            first = next((line.strip() for line in end.output.splitlines() if line.strip()), "")
            return CheckResult(False, error=f"the check exited with {end.code}" + (f": {first[:200]}" if first else ""))
        output = end.output.strip()
        if len(output) > OUTPUT_CHARS:
            output = output[:OUTPUT_CHARS] + "\n[… cut]"
        return CheckResult(True, output)

    return run


McpFind = Callable[[ToolContext, str], Tool | str]  # (context, tool name) -> the tool, or why it may not run


def mcp_runner(find: McpFind, timeout: float) -> CheckRunner:
    """The ``mcp`` kind: the tool ``find`` gives for the check's creator, called for at most ``timeout`` s."""

    async def run(ctx: ToolContext, check: McpCheck) -> CheckResult:
        found = find(ctx, check.tool)
        if isinstance(found, str):
            return CheckResult(False, error=found)
        if (refusal := await gated(ctx, found, check.arguments)) is not None:
            return CheckResult(False, error=refusal)
        try:
            async with asyncio.timeout(timeout):
                output = await found.function(ctx, **check.arguments)
        except TimeoutError:
            return CheckResult(False, error=f"the check did not finish within {timeout:g} s")
        except ToolError as exc:
            return CheckResult(False, error=f"the check failed: {str(exc)[:200]}")
        text = (output.text if isinstance(output, ToolOutput) else str(output)).strip()
        if not text or text == NOTHING:
            log.info("check says nothing to do session=%s run=%s", ctx.session_key, ctx.run_id)
            return CheckResult(False)
        return CheckResult(True, text[:OUTPUT_CHARS] + ("\n[… cut]" if len(text) > OUTPUT_CHARS else ""))

    return run


def checks_for(settings: ExecSettings | None, timeout: float, mcp: McpFind | None = None,
               exec_tool: Tool | None = None) -> Checks:
    """The check kinds this installation runs: ``command`` while exec is enabled (gated as a call
    of ``exec_tool``), ``mcp`` with MCP servers (``mcp`` finds a tool for a creator)."""
    checks = Checks()
    if settings is not None:
        checks.register(CommandCheck.KIND, command_runner(settings, timeout, exec_tool))
    if mcp is not None:
        checks.register(McpCheck.KIND, mcp_runner(mcp, timeout))
    return checks


def check_allowed(policy: Callable[[Conversation, bool], ToolPolicy], rules: ApprovalRules, *, exec_enabled: bool,
                  owners_only: bool) -> Callable[[Conversation, bool], bool]:
    """Whether a person (an owner or not) may give a task a check command in a conversation: exec
    is on, open to them (``tools.exec.owners_only``), offered to them there (the tool policy), and
    needs no approval for them (nobody is there to give it when the check runs)."""

    def allowed(conversation: Conversation, owner: bool) -> bool:
        return (exec_enabled and (owner or not owners_only) and policy(conversation, owner).permits("exec")
                and not rules.needs("exec", is_owner=owner))

    return allowed


@runtime_checkable
class GrantedTools(Protocol):
    def granted(self, ctx: ToolContext, name: str) -> Tool | None: ...


def check_tools(servers: GrantedTools, policy: Callable[[Conversation, bool], ToolPolicy],
                rules: ApprovalRules) -> McpFind:
    """Which MCP tool a person may have as a task's check, asked when the task is made and
    again when it runs: one their run may use now (granted, its server up), offered in the
    conversation (the tool policy), and needing no approval for them (nobody is there to give
    it when the check runs)."""

    def find(ctx: ToolContext, name: str) -> Tool | str:
        found = servers.granted(ctx, name)
        if found is None:
            return f"{name} is not an MCP tool this person may use now (or its server is down)"
        if not policy(ctx.conversation, ctx.sender_is_owner).permits(name):
            return f"{name} is not allowed in this chat"
        if rules.needs(name, is_owner=ctx.sender_is_owner, declared=found.approval):
            return f"{name} needs a person's approval, so it cannot be a check"
        return found

    return find
