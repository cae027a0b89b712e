"""The exec tool: output and exit code, the workspace as cwd, no secrets, timeouts, the
output cap, and nothing left running after a cancel (``/stop``)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from bot.conversation import ToolCall, ToolResult
from bot.tools import ToolCategory, ToolContext, ToolRegistry, builtin_registry, exec_command
from bot.tools import exec as exec_tool

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(ws, "agent:main:telegram:dm:42", "run-1", "main", "telegram", "dm", "42")


@pytest.fixture
def registry() -> ToolRegistry:
    return builtin_registry(exec_enabled=True)


async def run(registry: ToolRegistry, ctx: ToolContext, command: str, **extra: object) -> ToolResult:
    arguments = json.dumps({"command": command, **extra})
    [result] = await registry.execute([ToolCall("call-1", "exec", arguments)], ctx)
    return result


def alive(pid: int) -> bool:
    """Running or stopped; a zombie (waiting for init to reap it) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


async def all_dead(pids: list[int], within: float = 1.0) -> bool:
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def wait_for_file(path: Path, within: float = 2.0) -> int:
    deadline = time.monotonic() + within
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path.name} never written"
        await asyncio.sleep(0.01)
    return int(path.read_text())


# -- registration -----------------------------------------------------------------------

def test_off_by_default_and_on_when_asked() -> None:
    assert "exec" not in builtin_registry()
    on = builtin_registry(exec_enabled=True)
    assert "exec" in on and on.get("exec") is exec_command
    assert exec_command.category is ToolCategory.EXEC
    assert exec_command.parameters["required"] == ["command"]
    # the registry's limit leaves room for the tool's own timeout report
    assert on.timeouts[ToolCategory.EXEC] > exec_tool.MAX_TIMEOUT + exec_tool.KILL_GRACE
    assert builtin_registry(exec_enabled=True, timeouts={ToolCategory.EXEC: 5}).timeouts[ToolCategory.EXEC] == 5


# -- results ------------------------------------------------------------------------------

async def test_output_and_exit_code(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "echo hello")
    assert result == ToolResult("call-1", "hello\n[exit code 0]", False)


async def test_stderr_merged_in_order(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "echo one; echo two >&2; echo three")
    assert result.content == "one\ntwo\nthree\n[exit code 0]"


async def test_non_zero_exit_is_a_normal_result(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "echo oops >&2; exit 3")
    assert result.content == "oops\n[exit code 3]" and not result.is_error
    assert (await run(registry, ctx, "true")).content == "[exit code 0]"
    assert (await run(registry, ctx, "printf no-newline")).content == "no-newline\n[exit code 0]"


async def test_killed_by_signal(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "kill -KILL $$")
    assert result.content == "[killed by signal SIGKILL]" and not result.is_error


async def test_cwd_and_home_are_the_workspace(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, 'pwd; echo "$HOME"; echo hi > made.txt; readlink /proc/self/fd/0')
    real = os.path.realpath(ctx.workspace)
    assert result.content == f"{real}\n{real}\n/dev/null\n[exit code 0]"
    assert (ctx.workspace / "made.txt").read_text() == "hi\n"


async def test_invalid_utf8_is_replaced(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, r"printf 'a\377b\n'")
    assert result.content == "a\ufffdb\n[exit code 0]"


# -- environment ---------------------------------------------------------------------------

async def test_environment_has_no_secrets(registry: ToolRegistry, ctx: ToolContext,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOO_API_KEY", "sk-foo-hush")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:tg-hush")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/openai-hush")
    monkeypatch.setenv("DB_PASSWORD", "pw-hush")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = await run(registry, ctx, "env")
    assert "hush" not in result.content
    names = {line.split("=", 1)[0] for line in result.content.splitlines() if "=" in line}
    assert {"FOO_API_KEY", "TELEGRAM_BOT_TOKEN", "OPENAI_BASE_URL", "DB_PASSWORD"}.isdisjoint(names)
    assert "PATH=/usr/bin:/bin" in result.content.splitlines()
    assert f"HOME={os.path.realpath(ctx.workspace)}" in result.content.splitlines()


def test_environment_is_an_allowlist(tmp_path: Path) -> None:
    source = {"PATH": "/x/bin", "LANG": "de_DE.UTF-8", "TZ": "UTC", "HOME": "/root", "TERM": "xterm",
              "ANTHROPIC_API_KEY": "k", "SLACK_APP_TOKEN": "t", "GITHUB_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
              "DISCORD_BOT_TOKEN": "t", "USER": "bot"}
    env = exec_tool.exec_environment(tmp_path, source)
    assert env == {"PATH": "/x/bin", "LANG": "de_DE.UTF-8", "TZ": "UTC", "HOME": str(tmp_path),
                   "TERM": "dumb", "TMPDIR": env["TMPDIR"]}
    assert exec_tool.exec_environment(tmp_path, {})["PATH"]  # a usable PATH even when ours is unset


# -- refusals ----------------------------------------------------------------------------

async def test_empty_command_and_bad_timeout_refused(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "   ")
    assert result.is_error and "empty" in result.content
    result = await run(registry, ctx, "echo hi", timeout=0)
    assert result.is_error and "timeout" in result.content


# -- timeout ---------------------------------------------------------------------------

async def test_timeout_kills_the_group_and_keeps_the_output(registry: ToolRegistry, ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await run(registry, ctx, "echo before; sleep 30 & echo $! > bg.pid; sleep 30", timeout=1)
    assert 0.9 < time.monotonic() - started < 3
    assert result.is_error
    assert result.content == "before\n[timed out after 1 s; the command was killed]"
    assert await all_dead([int((ctx.workspace / "bg.pid").read_text())])


async def test_timeout_capped_by_module_cap(registry: ToolRegistry, ctx: ToolContext,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exec_tool, "MAX_TIMEOUT", 0.5)
    started = time.monotonic()
    result = await run(registry, ctx, "sleep 30", timeout=600)
    assert result.is_error and "timed out after 0.5 s" in result.content
    assert time.monotonic() - started < 2


async def test_sigterm_ignored_then_sigkill(registry: ToolRegistry, ctx: ToolContext,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exec_tool, "KILL_GRACE", 0.3)
    started = time.monotonic()
    result = await run(registry, ctx, "trap '' TERM; echo $$ > sh.pid; while :; do sleep 0.05; done", timeout=1)
    assert result.is_error and "timed out" in result.content
    assert 1.2 < time.monotonic() - started < 3
    assert await all_dead([int((ctx.workspace / "sh.pid").read_text())])


# -- background children ----------------------------------------------------------------

async def test_background_child_does_not_hold_the_call(registry: ToolRegistry, ctx: ToolContext) -> None:
    """The shell exits at once; its background child (which holds stdout) is killed with the group."""
    started = time.monotonic()
    result = await run(registry, ctx, "sleep 300 & echo $! > bg.pid; echo done")
    assert time.monotonic() - started < 2
    assert result.content == "done\n[exit code 0]"
    assert await all_dead([int((ctx.workspace / "bg.pid").read_text())])


# -- output cap -------------------------------------------------------------------------

async def test_output_cap_keeps_head_and_tail(registry: ToolRegistry, ctx: ToolContext) -> None:
    command = "printf 'A%.0s' $(seq 50000); printf 'B%.0s' $(seq 50000); echo"
    result = await run(registry, ctx, command)
    assert not result.is_error
    head, marker, tail = result.content.split("\n", 2)
    assert head == "A" * 10_000
    assert marker == "[… 80,001 of 100,001 characters cut …]"
    assert tail == "B" * 9_999 + "\n[exit code 0]"
    assert len(result.content) < exec_tool.MAX_OUTPUT_CHARS + 100


async def test_chatty_process_does_not_hang(registry: ToolRegistry, ctx: ToolContext) -> None:
    """Megabytes through the pipe: read as they come, so the writer never blocks on a full pipe."""
    result = await run(registry, ctx, "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo end", timeout=5)
    assert result.content.endswith("x\nend\n[exit code 0]") and "characters cut" in result.content


@pytest.mark.parametrize(("chunks", "expected"), [
    ([b"abc"], "abc"),
    ([b"\xc3", b"\xa9t\xc3", b"\xa9"], "été"),  # a character split across reads
    ([b"a" * 6, b"b" * 6], "aaaaa\n[… 2 of 12 characters cut …]\nbbbbb"),
    ([b"\xff"], "\ufffd"),
])
def test_output_capture(chunks: list[bytes], expected: str) -> None:
    capture = exec_tool.OutputCapture(limit=10)
    for chunk in chunks:
        capture.feed(chunk)
    assert capture.text() == expected


# -- cancellation (/stop) ---------------------------------------------------------------

@pytest.mark.parametrize("via_registry", [True, False])
async def test_cancel_kills_shell_and_grandchild(registry: ToolRegistry, ctx: ToolContext, via_registry: bool) -> None:
    command = "echo $$ > shell.pid; sleep 300 & echo $! > child.pid; sleep 300; echo never"
    if via_registry:
        task = asyncio.create_task(run(registry, ctx, command))
    else:
        task = asyncio.create_task(exec_command.function(ctx, command=command))
    shell = await wait_for_file(ctx.workspace / "shell.pid")
    child = await wait_for_file(ctx.workspace / "child.pid")
    assert alive(shell) and alive(child)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1
    with pytest.raises(ProcessLookupError):
        os.kill(shell, 0)  # our own child is dead and reaped before the CancelledError reaches us
    # the grandchild dead within a second (init reaps it; a zombie until then)
    assert await all_dead([shell, child])


async def test_registry_timeout_is_a_cancel_too(ctx: ToolContext) -> None:
    """The registry's own limit cancels the tool: the group dies all the same."""
    registry = builtin_registry(exec_enabled=True, timeouts={ToolCategory.EXEC: 0.5})
    result = await run(registry, ctx, "echo $$ > shell.pid; sleep 300 & echo $! > child.pid; sleep 300")
    assert result.is_error and result.content == "exec timed out after 0.5 s"
    pids = [int((ctx.workspace / name).read_text()) for name in ("shell.pid", "child.pid")]
    assert await all_dead(pids)
