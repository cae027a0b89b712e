"""The tool registry: a plain dict of tools, and the runner of one iteration's calls.

``ToolRegistry.execute`` never raises for a tool's problems: unknown tools, bad JSON,
arguments that miss the schema, timeouts, ``ToolError``s and bugs all come back as
``ToolResult(is_error=True)`` with a sentence the model can act on. Only cancellation
of the caller propagates (``/stop`` and shutdown decide what it means, not us).

A run uses a view of it: ``restricted`` to the tools its ``ToolPolicy`` permits (a call to
another is refused, saying why), ``joined`` with those its toolsets offer (MCP servers, skills),
some held back until the run enables them by name (``enable``), so its tools can grow as it runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, TypeAlias

from bot.llm import ImagePart, ToolCall, ToolResult
from bot.providers.base import ToolSpec
from bot.tools.base import DEFAULT_TIMEOUTS, Tool, ToolCategory, ToolContext, ToolError, ToolOutput
from bot.tools.policy import ToolPolicy
from bot.tools.schema import check_arguments, describe_parameters

log = logging.getLogger(__name__)

OnDone: TypeAlias = Callable[[ToolCall, ToolResult, float], None]  # call, result, seconds

MAX_OUTPUT_CHARS = 50_000
_EXCERPT_CHARS = 200
_MARKER_ROOM = 100  # characters kept free for the truncation marker


class ToolRegistry:
    """Tools by name, registered like plugins; built-ins are no different from extras."""

    def __init__(self, tools: Iterable[Tool] = (), *, timeouts: Mapping[ToolCategory, float] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: tuple[ToolSpec, ...] | None = None
        self._withheld: dict[str, str] = {}  # tools registered but not offered (a restricted view): name -> why
        self._held: dict[str, Tool] = {}  # a run's tools held back until enabled (``joined``)
        self._views: dict[ToolPolicy, ToolRegistry] = {}
        self.timeouts: dict[ToolCategory, float] = {**DEFAULT_TIMEOUTS, **(timeouts or {})}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._specs = None
        self._views.clear()
        return tool

    def restricted(self, policy: ToolPolicy | None) -> ToolRegistry:
        """The tools ``policy`` permits, as a registry of their own (cached per policy until the
        next ``register``); ``None`` is this registry unchanged."""
        if policy is None:
            return self
        view = self._views.get(policy)
        if view is None:
            withheld = {name: why for name in self._tools if (why := policy.refusal(name)) is not None}
            view = ToolRegistry((t for t in self._tools.values() if t.name not in withheld), timeouts=self.timeouts)
            view._withheld = {**self._withheld, **withheld}
            self._views[policy] = view
        return view

    def joined(self, extra: Iterable[Tool], policy: ToolPolicy | None = None,
               held: Iterable[Tool] = (), replacing: Iterable[Tool] = ()) -> ToolRegistry:
        """This registry with the ``extra`` tools ``policy`` permits after its own, as a registry
        of its own (not cached: a run's toolsets offer per run); a refused one is withheld with
        its reason, as ``restricted`` does. A name already here keeps its first tool. The
        permitted ``held`` tools are held back: not offered, nor callable, until ``enable``.
        Each of ``replacing`` takes the place of the tool of its name here, if there is one."""
        swaps = {t.name: t for t in replacing if t.name in self._tools}
        added: dict[str, Tool] = {}
        kept: dict[str, Tool] = {}
        withheld: dict[str, str] = {}
        for t, hold in chain(((t, False) for t in extra), ((t, True) for t in held)):
            if t.name in self._tools or t.name in kept or t.name in added:
                continue
            if policy is not None and (why := policy.refusal(t.name)) is not None:
                withheld[t.name] = why
            elif hold:
                kept[t.name] = t
            else:
                added[t.name] = t
        if not added and not withheld and not kept and not swaps:
            return self
        own = (swaps.get(name, t) for name, t in self._tools.items())
        view = ToolRegistry((*own, *added.values()), timeouts=self.timeouts)
        view._withheld = {**self._withheld, **withheld}
        view._held = kept
        return view

    def held(self) -> tuple[Tool, ...]:
        """The tools held back, not enabled yet (``HeldTools``)."""
        return tuple(self._held.values())

    def enable(self, names: Sequence[str]) -> tuple[Tool, ...]:
        """Offer the held tools named, from the next request on; those it enabled (``HeldTools``)."""
        enabled = tuple(self._held.pop(name) for name in dict.fromkeys(names) if name in self._held)
        for t in enabled:
            self.register(t)
        return enabled

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the provider is told, in registration order (cached until the next register)."""
        if self._specs is None:
            self._specs = tuple(t.spec for t in self._tools.values())
        return self._specs

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    async def execute(
        self,
        calls: Sequence[ToolCall],
        ctx: ToolContext,
        *,
        done: dict[str, ToolResult] | None = None,
        on_done: OnDone | None = None,
        images: dict[str, tuple[ImagePart, ...]] | None = None,
    ) -> list[ToolResult]:
        """Run one iteration's calls; results in the order of ``calls``.

        One call runs directly; several run concurrently in tasks owned here (cancelled
        and awaited if the caller is cancelled). Each result lands in ``done[call.id]``
        the moment it is ready, so a cancelled caller knows which calls finished, and
        ``on_done(call, result, seconds)`` is told (e.g. to record a span). The images a
        tool returned (``ToolOutput``) land in ``images[call.id]``."""
        if len(calls) == 1:
            return [await self._run(calls[0], ctx, done, on_done, images)]
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self._run(call, ctx, done, on_done, images), name=f"tool:{call.name}:{call.id}")
                     for call in calls]
        return [task.result() for task in tasks]

    async def _run(self, call: ToolCall, ctx: ToolContext, done: dict[str, ToolResult] | None,
                   on_done: OnDone | None, images: dict[str, tuple[ImagePart, ...]] | None) -> ToolResult:
        started = time.monotonic()
        output, is_error = await self._call(call, ctx)
        text = output if isinstance(output, str) else output.text
        if isinstance(output, ToolOutput) and output.images and images is not None:
            images[call.id] = output.images
        if len(text) > MAX_OUTPUT_CHARS:
            text = _cap(text)
        result = ToolResult(call.id, text, is_error)
        log.debug("tool %s (%s) %s in %.3f s, %d chars session=%s run=%s", call.name, call.id,
                  "failed" if is_error else "ok", time.monotonic() - started, len(text), ctx.session_key, ctx.run_id)
        if done is not None:
            done[call.id] = result
        if on_done is not None:
            on_done(call, result, time.monotonic() - started)
        return result

    async def _call(self, call: ToolCall, ctx: ToolContext) -> tuple[str | ToolOutput, bool]:
        tool = self._tools.get(call.name)
        if tool is None:
            available = ", ".join(sorted(self._tools)) or "none"
            if call.name in self._withheld:
                why = self._withheld[call.name]
                log.info("tool %s refused (%s) session=%s run=%s", call.name, why, ctx.session_key, ctx.run_id)
                return f"{call.name} is not available in this chat ({why}); available tools: {available}", True
            if call.name in self._held:
                return f"{call.name} is not enabled yet: find it with mcp_tool_search first", True
            return f"unknown tool {call.name!r}; available tools: {available}", True
        arguments, problem = _parse_arguments(call.arguments)
        if problem:
            return f"{call.name}: {problem}", True
        arguments, problems = check_arguments(tool.parameters, arguments)
        if problems:
            return (f"{call.name}: invalid arguments: {'; '.join(problems)}. "
                    f"Expected: {describe_parameters(tool.parameters)}"), True
        if ctx.gate is not None:  # waiting for a person is not the tool's time
            refusal = await ctx.gate.permit(ctx, tool, call.id, arguments)
            if refusal is not None:
                return refusal, True
        timeout = tool.timeout or self.timeouts.get(tool.category, DEFAULT_TIMEOUTS[ToolCategory.OTHER])
        try:
            async with asyncio.timeout(timeout):
                output = await tool.function(ctx, **arguments)
        except TimeoutError:
            log.warning("tool %s (%s) timed out after %g s session=%s run=%s",
                        call.name, call.id, timeout, ctx.session_key, ctx.run_id)
            return f"{call.name} timed out after {timeout:g} s", True
        except ToolError as exc:
            return str(exc) or f"{call.name} failed", True
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # we are being cancelled: always propagate
            # the tool itself raised CancelledError without anyone cancelling us
            log.warning("tool %s (%s) raised CancelledError on its own session=%s run=%s",
                        call.name, call.id, ctx.session_key, ctx.run_id)
            return f"{call.name} was cancelled", True
        except Exception as exc:
            log.exception("tool %s (%s) crashed session=%s run=%s", call.name, call.id, ctx.session_key, ctx.run_id)
            return f"{call.name} failed: {type(exc).__name__}: {exc}", True
        return (output if isinstance(output, (str, ToolOutput)) else str(output)), False


def _parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments object, or a problem sentence. Blank arguments mean ``{}``."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except RecursionError:
        return {}, f"arguments are nested too deeply: {_excerpt(raw)}"
    except ValueError as exc:
        return {}, f"arguments are not valid JSON ({exc}): {_excerpt(raw)}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}: {_excerpt(raw)}"
    return value, None


def _excerpt(raw: str) -> str:
    return raw if len(raw) <= _EXCERPT_CHARS else f"{raw[:_EXCERPT_CHARS]}…"


def _cap(text: str) -> str:
    keep = MAX_OUTPUT_CHARS - _MARKER_ROOM
    return f"{text[:keep]}\n[… output cut: {len(text) - keep:,} of {len(text):,} characters not shown]"


def canonical_call(call: ToolCall) -> tuple[str, str]:
    """``(name, arguments as canonical JSON)``; unparseable arguments are kept as stripped text."""
    try:
        arguments = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False)
    except (ValueError, RecursionError):
        arguments = call.arguments.strip()
    return call.name, arguments


class RepeatDetector:
    """Spots the same call with the same arguments ``threshold`` times in a row.

    Feed it each iteration's calls in order; ``observe`` returns the call that just made
    the streak (the model is stuck in a loop), else ``None``. Pure: no clock, no I/O."""

    threshold = 3

    def __init__(self) -> None:
        self._last: tuple[str, str] | None = None
        self._streak = 0

    def observe(self, calls: Sequence[ToolCall]) -> ToolCall | None:
        repeated: ToolCall | None = None
        for call in calls:
            key = canonical_call(call)
            self._streak = self._streak + 1 if key == self._last else 1
            self._last = key
            if self._streak >= self.threshold and repeated is None:
                repeated = call
        return repeated
