"""The tool port and registry: schemas from signatures, and a runner that never crashes."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

from bot.conversation import Conversation
from bot.llm import ToolCall, ToolResult
from bot.tools import (
    DEFAULT_TIMEOUTS,
    RepeatDetector,
    Tool,
    ToolCategory,
    ToolContext,
    ToolError,
    ToolRegistry,
    builtin_registry,
    tool,
)
from bot.tools.schema import check_arguments


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(tmp_path, Conversation.of_key("agent:main:telegram:dm:42"), "run-1", "main", "42")


def call(name: str, arguments: str | dict[str, Any] = "{}", id: str | None = None) -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id or f"call-{name}", name, raw)


# -- schemas from signatures -------------------------------------------------------------

async def f_plain(ctx: ToolContext, path: str, offset: int = 0, limit: int = 2000) -> str:
    """Read."""
    return ""


async def f_kinds(ctx: ToolContext, ratio: float, flag: bool, tags: list[str], mode: Literal["a", "b"] = "a") -> str:
    """Kinds."""
    return ""


async def f_optional(ctx: ToolContext, pattern: str | None = None, depth: int | None = None) -> str:
    """Optional."""
    return ""


async def f_annotated(ctx: ToolContext, path: Annotated[str, "Where the file is."],
                      n: Annotated[int, "How many."] = 3) -> str:
    """Annotated."""
    return ""


async def f_union(ctx: ToolContext, value: str | int, levels: Literal[1, 2, 3] = 1) -> str:
    """Union."""
    return ""


async def f_none(ctx: ToolContext) -> str:
    """No arguments."""
    return ""


def obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


SCHEMAS = [
    ("defaults are not required", f_plain, obj({
        "path": {"type": "string"},
        "offset": {"type": "integer", "default": 0},
        "limit": {"type": "integer", "default": 2000},
    }, ["path"])),
    ("float bool list literal", f_kinds, obj({
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
    }, ["ratio", "flag", "tags"])),
    ("X | None = None is optional, schema of X", f_optional, obj({
        "pattern": {"type": "string"},
        "depth": {"type": "integer"},
    }, [])),
    ("Annotated descriptions", f_annotated, obj({
        "path": {"type": "string", "description": "Where the file is."},
        "n": {"type": "integer", "description": "How many.", "default": 3},
    }, ["path"])),
    ("union and int literal", f_union, obj({
        "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "levels": {"type": "integer", "enum": [1, 2, 3], "default": 1},
    }, ["value"])),
    ("no arguments", f_none, obj({}, [])),
]


@pytest.mark.parametrize(("function", "expected"), [s[1:] for s in SCHEMAS], ids=[s[0] for s in SCHEMAS])
def test_schema_from_signature(function: Any, expected: dict[str, Any]) -> None:
    made = tool(category=ToolCategory.OTHER)(function)
    assert made.parameters == expected
    assert made.spec.parameters == expected and made.spec.name == function.__name__


def test_description_and_args_from_docstring() -> None:
    @tool(category=ToolCategory.FILE, name="grep")
    async def search(ctx: ToolContext, pattern: str, path: Annotated[str, "Wins over Args."] = ".") -> str:
        """Search files for a pattern.
        Second line of the first paragraph.

        More detail the model does not need.

        Args:
            pattern (str): A regular expression,
                continued on the next line.
            path: Ignored, Annotated wins.

        Returns:
            matching lines.
        """
        return ""

    assert search.name == "grep" and search.category is ToolCategory.FILE
    assert search.description == "Search files for a pattern. Second line of the first paragraph."
    props = search.parameters["properties"]
    assert props["pattern"]["description"] == "A regular expression, continued on the next line."
    assert props["path"]["description"] == "Wins over Args."
    assert search.spec is search.spec  # built once at decoration


async def _no_docstring(ctx: ToolContext) -> str:
    return ""


async def _bad_first(path: str) -> str:
    """No context."""
    return ""


async def _bad_type(ctx: ToolContext, items: set[str]) -> str:
    """Sets are not JSON."""
    return ""


async def _var_args(ctx: ToolContext, *paths: str) -> str:
    """Varargs."""
    return ""


def _not_async(ctx: ToolContext) -> str:
    """Sync."""
    return ""


@pytest.mark.parametrize("function", [_no_docstring, _bad_first, _bad_type, _var_args, _not_async],
                         ids=["no docstring", "no ctx", "set type", "varargs", "not async"])
def test_bad_tool_definitions_fail_at_decoration(function: Any) -> None:
    with pytest.raises(TypeError):
        tool(category=ToolCategory.OTHER)(function)


def test_bad_tool_name_refused() -> None:
    with pytest.raises(ValueError):
        tool(category=ToolCategory.OTHER, name="read file")(f_none)


# -- registry basics ----------------------------------------------------------------------

def test_register_names_specs_cached_and_duplicates() -> None:
    registry = ToolRegistry()
    a = registry.register(tool(category=ToolCategory.OTHER, name="a")(f_none))
    specs = registry.specs()
    assert specs == (a.spec,) and registry.specs() is specs  # cached
    registry.register(tool(category=ToolCategory.OTHER, name="b")(f_none))
    assert registry.names() == ("a", "b") and len(registry.specs()) == 2  # invalidated
    assert registry.get("a") is a and registry.get("zz") is None and "b" in registry
    with pytest.raises(ValueError, match="already registered"):
        registry.register(tool(category=ToolCategory.OTHER, name="a")(f_none))


def test_timeouts_default_by_category_and_overridable() -> None:
    assert DEFAULT_TIMEOUTS == {"file": 30, "exec": 600, "network": 120, "agent": 900, "mcp": 120, "other": 60}
    registry = ToolRegistry(timeouts={ToolCategory.EXEC: 5})
    assert registry.timeouts[ToolCategory.EXEC] == 5 and registry.timeouts[ToolCategory.FILE] == 30


def test_builtin_registry_has_the_file_and_memory_tools() -> None:
    assert builtin_registry().names() == ("read_file", "write_file", "edit_file", "list_files", "search_files",
                                          "memory_search", "memory_get")
    assert builtin_registry(exec_enabled=True).names()[-1] == "exec"


# -- execution ----------------------------------------------------------------------------

@tool(category=ToolCategory.OTHER)
async def sleepy(ctx: ToolContext, label: str, seconds: float) -> str:
    """Sleep, then say the label."""
    await asyncio.sleep(seconds)
    return f"{label} after {seconds}"


@tool(category=ToolCategory.OTHER)
async def echo(ctx: ToolContext, text: str, times: int = 1, mode: Literal["plain", "loud"] = "plain",
               tags: list[str] | None = None) -> str:
    """Echo text back."""
    out = text * times
    return (out.upper() if mode == "loud" else out) + (f" {tags}" if tags else "")


@tool(category=ToolCategory.OTHER)
async def broken(ctx: ToolContext) -> str:
    """Always a bug."""
    raise ValueError("boom")


@tool(category=ToolCategory.OTHER)
async def refuses(ctx: ToolContext) -> str:
    """Always a readable failure."""
    raise ToolError("no such file: notes.md")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([sleepy, echo, broken, refuses])


async def test_one_call(registry: ToolRegistry, ctx: ToolContext) -> None:
    done: dict[str, ToolResult] = {}
    results = await registry.execute([call("echo", {"text": "hi", "times": 2})], ctx, done=done)
    assert results == [ToolResult("call-echo", "hihi")]
    assert done == {"call-echo": results[0]}


async def test_parallel_calls_overlap_and_keep_the_original_order(registry: ToolRegistry, ctx: ToolContext) -> None:
    calls = [call("sleepy", {"label": "slow", "seconds": 0.15}, "1"),
             call("sleepy", {"label": "mid", "seconds": 0.1}, "2"),
             call("sleepy", {"label": "fast", "seconds": 0.05}, "3")]
    finished: list[str] = []

    class Recording(dict[str, ToolResult]):
        def __setitem__(self, key: str, value: ToolResult) -> None:
            finished.append(key)
            super().__setitem__(key, value)

    started = time.monotonic()
    results = await registry.execute(calls, ctx, done=Recording())
    elapsed = time.monotonic() - started
    assert [r.tool_call_id for r in results] == ["1", "2", "3"]
    assert [r.content for r in results] == ["slow after 0.15", "mid after 0.1", "fast after 0.05"]
    assert finished == ["3", "2", "1"]  # they finished out of order
    assert elapsed < 0.28  # overlapped: the sum of the sleeps is 0.3


async def test_a_bug_in_a_tool_becomes_an_error_result(registry: ToolRegistry, ctx: ToolContext,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="bot.tools.registry"):
        [result] = await registry.execute([call("broken")], ctx)
    assert result == ToolResult("call-broken", "broken failed: ValueError: boom", is_error=True)
    record = next(r for r in caplog.records if "crashed" in r.getMessage())
    assert record.exc_info is not None and "run-1" in record.getMessage()


async def test_tool_error_message_is_the_result(registry: ToolRegistry, ctx: ToolContext) -> None:
    [result] = await registry.execute([call("refuses")], ctx)
    assert result == ToolResult("call-refuses", "no such file: notes.md", is_error=True)


async def test_timeout_by_category(ctx: ToolContext) -> None:
    registry = ToolRegistry([sleepy], timeouts={ToolCategory.OTHER: 0.05})
    started = time.monotonic()
    [result] = await registry.execute([call("sleepy", {"label": "x", "seconds": 5})], ctx)
    assert time.monotonic() - started < 0.5
    assert result == ToolResult("call-sleepy", "sleepy timed out after 0.05 s", is_error=True)


async def test_unknown_tool_lists_the_available_ones(registry: ToolRegistry, ctx: ToolContext) -> None:
    [result] = await registry.execute([call("rm_rf")], ctx)
    assert result.is_error
    assert result.content == "unknown tool 'rm_rf'; available tools: broken, echo, refuses, sleepy"


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"text": "hi"', "echo: arguments are not valid JSON ("),
    ('[1, 2]', "echo: arguments must be a JSON object, got list: [1, 2]"),
    ('"hi"', "echo: arguments must be a JSON object, got str"),
    ('{"text": "' + "x" * 500, '{"text": "' + "x" * 190 + "…"),  # the excerpt is the first 200 characters
    ("[" * 100_000, "echo: arguments are nested too deeply: " + "[" * 200 + "…"),
], ids=["truncated json", "list", "string", "long excerpt", "deep nesting"])
async def test_bad_json_arguments(registry: ToolRegistry, ctx: ToolContext, raw: str, expected: str) -> None:
    [result] = await registry.execute([call("echo", raw)], ctx)
    assert result.is_error and expected in result.content
    assert len(result.content) < 400


VIOLATIONS = [
    ("missing required", {}, "missing required argument 'text'"),
    ("wrong type", {"text": "a", "times": "2"}, "'times' must be an integer, got a string"),
    ("bool is not int", {"text": "a", "times": True}, "'times' must be an integer, got true or false"),
    ("float is not int", {"text": "a", "times": 1.5}, "'times' must be an integer, got a number"),
    ("unknown key", {"text": "a", "colour": "red"}, "unknown argument 'colour'"),
    ("enum", {"text": "a", "mode": "quiet"}, "'mode' must be one of 'plain', 'loud', got 'quiet'"),
    ("list items", {"text": "a", "tags": ["x", 3]}, "'tags[1]' must be a string, got an integer"),
    ("null for required", {"text": None}, "'text' must be a string, got null"),
]


@pytest.mark.parametrize(("arguments", "expected"), [v[1:] for v in VIOLATIONS], ids=[v[0] for v in VIOLATIONS])
async def test_schema_violations(registry: ToolRegistry, ctx: ToolContext, arguments: dict[str, Any],
                                 expected: str) -> None:
    [result] = await registry.execute([call("echo", arguments)], ctx)
    assert result.is_error and result.content.startswith("echo: invalid arguments:")
    assert expected in result.content
    assert "Expected: text (string, required), times (integer)" in result.content


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"text": "a", "times": null, "tags": null}', "a"),  # null for optional = default
    ('{"text": "a", "mode": "loud", "tags": ["x"]}', "A ['x']"),
    ("", None),  # blank means {} -> missing text
])
async def test_valid_edge_arguments(registry: ToolRegistry, ctx: ToolContext, raw: str, expected: str | None) -> None:
    [result] = await registry.execute([call("echo", raw)], ctx)
    if expected is None:
        assert result.is_error and "missing required argument 'text'" in result.content
    else:
        assert result == ToolResult("call-echo", expected)


def test_check_arguments_is_pure() -> None:
    assert check_arguments(echo.parameters, {"text": "a", "times": None}) == ({"text": "a"}, [])


async def test_cancellation_mid_batch_propagates_and_done_holds_the_finished(ctx: ToolContext) -> None:
    fast_done = asyncio.Event()
    cleaned_up: list[str] = []

    @tool(category=ToolCategory.OTHER)
    async def work(ctx: ToolContext, label: str, seconds: float) -> str:
        """Work for a while."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cleaned_up.append(label)
            raise
        if label == "fast":
            asyncio.get_running_loop().call_soon(fast_done.set)
        return label

    registry = ToolRegistry([work])
    done: dict[str, ToolResult] = {}
    calls = [call("work", {"label": "slow1", "seconds": 10}, "1"),
             call("work", {"label": "fast", "seconds": 0.01}, "2"),
             call("work", {"label": "slow2", "seconds": 10}, "3")]
    runner = asyncio.create_task(registry.execute(calls, ctx, done=done))
    await asyncio.wait_for(fast_done.wait(), 1)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert done == {"2": ToolResult("2", "fast")}
    assert sorted(cleaned_up) == ["slow1", "slow2"]  # owned tasks were cancelled, not leaked


async def test_cancelling_a_single_call_propagates(registry: ToolRegistry, ctx: ToolContext) -> None:
    done: dict[str, ToolResult] = {}
    runner = asyncio.create_task(registry.execute([call("sleepy", {"label": "x", "seconds": 10})], ctx, done=done))
    await asyncio.sleep(0.01)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert done == {}


async def test_a_tool_raising_cancelled_on_its_own_is_a_tool_problem(ctx: ToolContext) -> None:
    @tool(category=ToolCategory.OTHER)
    async def flaky(ctx: ToolContext) -> str:
        """Awaits something that someone else cancelled."""
        raise asyncio.CancelledError

    [a, b] = await ToolRegistry([flaky, echo]).execute([call("flaky", id="1"), call("echo", {"text": "ok"}, "2")], ctx)
    assert a == ToolResult("1", "flaky was cancelled", is_error=True) and b == ToolResult("2", "ok")


async def test_output_is_capped_with_a_marker(ctx: ToolContext) -> None:
    registry = ToolRegistry([echo])
    [result] = await registry.execute([call("echo", {"text": "x", "times": 60_000})], ctx)
    assert len(result.content) <= 50_000 and not result.is_error
    assert result.content.startswith("x" * 49_000)
    assert result.content.endswith("[… output cut: 10,100 of 60,000 characters not shown]")


def test_tool_can_be_built_by_hand() -> None:
    schema = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    made = Tool("hand", "Made by hand.", ToolCategory.OTHER, schema, f_none)
    assert made.spec.description == "Made by hand."


# -- repeat detection ---------------------------------------------------------------------

A1 = ToolCall("1", "read_file", '{"path": "a", "offset": 0}')
A2 = ToolCall("2", "read_file", '{"offset":0,"path":"a"}')  # same call, other key order and spacing
B = ToolCall("3", "read_file", '{"path": "b"}')
W = ToolCall("4", "write_file", '{"path": "a", "offset": 0}')

REPEATS = [
    ("three identical in a row", [[A1], [A2], [A1]], [None, None, A1]),
    ("interrupted streak", [[A1], [A2], [B], [A1], [A2]], [None, None, None, None, None]),
    ("same args, other tool", [[A1], [W], [A1]], [None, None, None]),
    ("within one batch", [[A1, A2, A1]], [A1]),
    ("continues past three", [[A1], [A1], [A1], [A1]], [None, None, A1, A1]),
    ("empty iterations do not break it", [[A1], [], [A1], [A1]], [None, None, None, A1]),
    ("bad json compared as text", [[ToolCall("x", "t", "{oops")]] * 3, [None, None, ToolCall("x", "t", "{oops")]),
]


@pytest.mark.parametrize(("batches", "expected"), [r[1:] for r in REPEATS], ids=[r[0] for r in REPEATS])
def test_repeat_detector(batches: list[list[ToolCall]], expected: list[ToolCall | None]) -> None:
    detector = RepeatDetector()
    assert [detector.observe(batch) for batch in batches] == expected
