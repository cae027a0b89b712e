"""The core's ``tools:`` section: which tools are offered, who approves their calls, the exec
sandbox's bounds and web_fetch."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from bot.config.types import Float, Int, Section, ToolPattern, ToolRulesConfig


class ExecLimitsConfig(Section):
    """What one command may take (``bot.tools.bounds``); null leaves a bound off."""

    processes: Annotated[Int, Field(ge=8)] | None = Field(default=256, description="processes and threads at once; "
        "a fork bomb is stopped at once with a cgroup, else held to this until the timeout (not as root)")
    memory_mb: Annotated[Int, Field(ge=64)] | None = Field(default=1024, description="the command's processes "
        "together (each one without a cgroup)")
    file_size_mb: Annotated[Int, Field(ge=1)] | None = Field(default=512, description="the largest file a command "
        "may write (SIGXFSZ past it)")
    tmp_mb: Annotated[Int, Field(ge=1)] | None = Field(default=256, description="the sandbox's /tmp, a tmpfs "
        "(memory); needs bubblewrap --size")
    cgroup: bool = Field(default=True, description="a cgroup per command when the bot may make one "
        "(docs/guide/exec-sandbox.md)")


class ExecToolConfig(Section):
    enabled: bool = Field(default=False, description="the `exec` shell tool: runs commands in the user's workspace, "
        "with a timeout and an output cap, killed on /stop")
    sandbox: Literal["bwrap", "none"] = Field(default="bwrap", description="bwrap: bubblewrap; the workspace (at "
        "/workspace) is the only writable place, a private /tmp, a fresh pid namespace, no view of the bot's "
        "config, database, environment or other workspaces. Needs bubblewrap and user namespaces (Docker: "
        "docs/operations/docker.md). none: runs unconfined and can read everything the bot's OS user can, keys "
        "included (`chatgate check` warns)")
    network: bool = Field(default=False, description="let sandboxed commands reach the network")
    owners_only: bool = Field(default=True, description="only the channels' owners may have commands run (to open "
        "exec to everyone allowed, also take exec out of tools.owners_only)")
    limits: ExecLimitsConfig = Field(default=ExecLimitsConfig(), description="what one command may take; over a "
        "bound the command fails (the bot does not) and its result says which bound; null: unbounded")


class WebFetchConfig(Section):
    enabled: bool = Field(default=False, description="fetch public web pages as text for the model")
    allow_private: bool = Field(default=False, description="true also reaches private/loopback/metadata addresses "
        "(SSRF!): only for a bot that only you use, on a network you trust")
    max_bytes: Annotated[Int, Field(ge=1024, le=50_000_000)] = Field(default=2_000_000, description="of the page as "
        "downloaded (after decompression); the rest is cut")
    timeout: Annotated[Float, Field(gt=0, le=300)] = Field(default=20.0, description="seconds for the whole fetch, "
        "redirects included")
    max_chars: Annotated[Int, Field(ge=500, le=200_000)] = Field(default=20_000, description="of text given to the "
        "model")


def _approver(value: Any) -> Any:
    if isinstance(value, str) and value not in ("requester", "owners") and not re.match(r"^[a-z]+:.+$", value):
        raise ValueError("must be requester, owners, or a person as platform:user_id")
    return value


class ToolsConfig(ToolRulesConfig):
    """``allow``/``deny`` apply everywhere; a group's ``tools`` narrow them further."""

    owners_only: tuple[ToolPattern, ...] = Field(default=("exec",), description="offered only to the platform's "
        "`owners`")
    approval: dict[ToolPattern, Literal["ask", "never"]] = Field(default={}, description="which calls wait for a "
        "person's \"Allow\" (docs/guide/approvals.md): tool name or glob -> ask | never; the first that matches wins "
        "and binds owners too. Unlisted: exec and mcp__* tools ask everyone but owners (an MCP server's own "
        "`approval:` binds everyone), the rest run", examples=[{"write_file": "ask", "mcp__github__*": "never"}])
    approvers: tuple[Annotated[str, AfterValidator(_approver)], ...] = Field(
        default=("requester", "owners"), description="who may answer a card: requester (the person the run acts "
        "for; a turn of several people's messages: not them, an owner or a named approver), owners, and/or people "
        "as platform:user_id")
    approval_timeout: Annotated[Float, Field(gt=0, le=86_400)] = Field(default=300.0, description="seconds a card "
        "waits; then the call is denied (the model is told)")
    approval_session_hours: Annotated[Float, Field(gt=0, le=720)] = Field(default=8.0, description="\"Allow for "
        "this session\" covers only the person it was asked for, until /new or this many hours; in groups only an "
        "owner's press allows for the session (anyone else's counts as \"once\")")
    allow_always: bool = Field(default=False, description="also offer \"Always allow\": remembered per person for "
        "the exact call")
    exec: ExecToolConfig = ExecToolConfig()
    web_fetch: WebFetchConfig = WebFetchConfig()

