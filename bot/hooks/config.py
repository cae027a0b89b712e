"""``hooks:``: the commands that may refuse a tool call before it runs."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field

from bot.config.types import CapabilitySection, Float, Section, ToolPattern


def _command(value: str) -> str:
    if not value.strip():  # ``sh -c " "`` exits 0: a blank hook would let every call through
        raise ValueError("is blank: give the command that judges the call")
    return value


class PreToolHookConfig(Section):
    run: Annotated[str, AfterValidator(_command)] = Field(description="a shell command, run like exec, the call as "
        "JSON on stdin")
    tools: tuple[ToolPattern, ...] = Field(default=("*",), description="names or globs (default: every tool)")
    timeout: Annotated[Float, Field(gt=0, le=600)] = Field(default=10.0, description="seconds; a hook that does not "
        "answer refuses the call")


class HooksConfig(CapabilitySection):
    model_config = ConfigDict(json_schema_extra={"description": (
        "the operator's own checks of tool calls, docs/guide/approvals.md")})

    pre_tool: tuple[PreToolHookConfig, ...] = Field(default=(), description="commands that may refuse a tool call "
        "before it runs (and before approval). Each runs like exec (its sandbox and limits, no network) with the "
        "call as JSON on stdin: exit 0 lets it through, any other exit refuses it and the model reads the first line "
        "of output.", examples=[[{"tools": ["exec"], "run": (
            "python3 -c \"import json,sys; c=json.load(sys.stdin); sys.exit('rm -rf' in c['arguments']['command'])\""),
            "timeout": 10}]])

    def describe(self) -> list[str]:
        """One line a hook: the tools it sees and its program (never the whole command line,
        which may carry a token)."""
        return [f"hooks      before {', '.join(hook.tools)}: {hook.run.split()[0]} … "
                f"({hook.timeout:g} s)" for hook in self.pre_tool]
