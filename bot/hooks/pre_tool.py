"""Pre-tool hooks: the operator's commands that may refuse a tool call before it runs.

``hooks.pre_tool`` lists hooks, each a shell command (``run``) for the tools its ``tools``
globs match, run as ``exec`` runs commands (the same sandbox and bounds, a clean environment:
no secret of the bot's, no network) with the call as JSON on stdin, and nothing else::

    {"tool": "exec", "arguments": {...}, "session": "...", "platform": "telegram",
     "chat_id": "42", "user_id": "42", "run_id": "...", "call_id": "..."}

Exit 0 lets the call through to the next hook (and then to approval); any other exit, a
timeout or a hook that cannot start refuses it, and the model reads the hook's first line
of output as the reason. Hooks run in the order written.

A hook never runs in the person's workspace: what the person wrote there (a ``json.py`` that
``python3 -c 'import json'`` would import, a ``~/.jq`` that jq would load) could make it say
yes. Each hook runs in an empty folder made for it (its cwd and ``HOME``, read-only in the
sandbox), removed afterwards.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.tools.base import Tool, ToolContext, ToolError
from bot.tools.exec import run_shell
from bot.tools.sandbox import ExecSettings

if TYPE_CHECKING:
    from bot.hooks.config import PreToolHookConfig

log = logging.getLogger(__name__)

REASON_CHARS = 300


class PreToolHooks:
    """The gate's step (``bot.tools.base.Gate``) that runs the hooks matching a call."""

    def __init__(self, hooks: Sequence[PreToolHookConfig], settings: ExecSettings) -> None:
        self.hooks = tuple(hooks)
        self._settings = settings

    async def permit(self, ctx: ToolContext, called: Tool, call_id: str, arguments: Mapping[str, Any]) -> str | None:
        """None when every matching hook lets the call through; else the refusal."""
        tool = called.name
        matching = [hook for hook in self.hooks if any(fnmatchcase(tool, pattern) for pattern in hook.tools)]
        if not matching:
            return None
        payload = json.dumps({
            "tool": tool, "arguments": dict(arguments), "session": ctx.session_key, "platform": ctx.platform,
            "chat_id": ctx.conversation.chat_id, "user_id": ctx.user_id, "run_id": ctx.run_id, "call_id": call_id,
        }, ensure_ascii=False, default=str).encode()
        for n, hook in enumerate(matching, 1):
            try:
                with tempfile.TemporaryDirectory(prefix="chatgate-hook-") as scratch:
                    os.chmod(scratch, 0o555)  # nothing to read, nothing to leave
                    try:
                        end = await run_shell(replace(ctx, workspace=Path(scratch)), hook.run, hook.timeout,
                                              self._settings, stdin=payload)
                    finally:
                        os.chmod(scratch, 0o700)  # so that it can be removed
            except ToolError as exc:
                log.warning("pre-tool hook %d for %s could not start session=%s: %s", n, tool, ctx.session_key, exc)
                return f"{tool} was refused: a pre-tool hook could not run ({exc})."
            if end.timed_out:
                return f"{tool} was refused: a pre-tool hook did not answer within {hook.timeout:g} s."
            if end.code != 0:
                reason = next((line.strip() for line in end.output.splitlines() if line.strip()), "")
                reason = reason[:REASON_CHARS] or f"exit code {end.code}"
                log.info("pre-tool hook %d refused %s session=%s run=%s: %s", n, tool, ctx.session_key, ctx.run_id,
                         reason)
                return f"{tool} was refused by a pre-tool hook: {reason}"
        return None

