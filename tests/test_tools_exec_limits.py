"""exec's bounds (``tools.exec.limits``), with real bubblewrap and real processes: a fork bomb,
a ``dd`` into ``/tmp`` and into the workspace, and a memory hog each fail the command, say so
in its last line, leave nothing running, and leave the bot (its event loop, another chat's
command) working. Then the config keys."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config.tools import ExecLimitsConfig
from bot.conversation import Conversation
from bot.errors import ConfigError
from bot.llm import ToolCall, ToolResult
from bot.settings import Config, load_config
from bot.tools import ExecSettings, ToolContext, ToolRegistry, builtin_registry
from bot.tools.bounds import CgroupRoot, CommandLimits, find_cgroups, host_cgroups, unenforced
from bot.tools.sandbox import bwrap_arguments
from tests.procs import all_dead, marker, pids_of

pytestmark = pytest.mark.timeout(30)
ROOT = Path(__file__).resolve().parent.parent

BOMB = "bash -c ':(){ :|:& };:'"  # the classic one; dash refuses ':' as a function name
TEN_GB = "dd if=/dev/zero of={to} bs=1M count=10240"
needs_cgroup = pytest.mark.skipif(host_cgroups().pids is None or host_cgroups().memory is None,
                                  reason="no cgroup (pids and memory) this process may make")


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return context(tmp_path / "ws")


def context(ws: Path, chat: str = "42") -> ToolContext:
    ws.mkdir(exist_ok=True)
    return ToolContext(ws, Conversation.of_key(f"agent:main:telegram:dm:{chat}"), f"run-{chat}", "main", chat,
                       sender_is_owner=True)


@pytest.fixture(params=["bwrap", "none"])
def sandbox(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def registry(sandbox: str = "bwrap", **limits: object) -> ToolRegistry:
    settings = ExecSettings(sandbox=sandbox, limits=ExecLimitsConfig(**limits))  # type: ignore[arg-type]
    return builtin_registry(exec_enabled=True, exec_settings=settings)


async def run(reg: ToolRegistry, ctx: ToolContext, command: str, timeout: int = 20) -> ToolResult:
    arguments = json.dumps({"command": command, "timeout": timeout})
    [result] = await reg.execute([ToolCall("call-1", "exec", arguments)], ctx)
    return result


class LoopLag:
    """How late the event loop ran a 20 ms sleep, at worst, while the block ran."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            start = time.monotonic()
            await asyncio.sleep(0.02)
            self.worst = max(self.worst, time.monotonic() - start - 0.02)

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def our_cgroups() -> list[Path]:
    root = host_cgroups()
    return [p for d in {root.pids, root.memory} if d is not None for p in d.glob(f"chatgate-exec-{os.getpid()}-*")]


# -- a fork bomb ----------------------------------------------------------------------------

@needs_cgroup
async def test_fork_bomb_is_stopped_and_the_bot_keeps_working(tmp_path: Path, sandbox: str) -> None:
    mark = marker()
    reg = registry(sandbox, processes=64)
    async with LoopLag() as lag:
        started = time.monotonic()
        bomb = asyncio.create_task(run(reg, context(tmp_path / "a"), f"sleep {mark} & {BOMB}; wait", timeout=20))
        await asyncio.sleep(0.3)  # the bomb is going off: another chat's command still runs
        other = await run(registry(sandbox), context(tmp_path / "b", chat="43"), "echo still here")
        result = await bomb
        took = time.monotonic() - started
    assert other.content == "still here\n[exit code 0]"
    assert result.is_error and result.content.endswith(
        "[stopped: the command went over the limit of 64 processes; everything it started was killed]")
    assert took < 10, f"the bomb ran {took:.1f} s: it should be stopped, not timed out"
    assert await all_dead(mark, within=2.0), "a process of the bomb outlived the command"
    assert lag.worst < 1.0, f"the event loop stalled {lag.worst:.2f} s"
    assert not our_cgroups(), "the command's cgroup was left behind"


@needs_cgroup
async def test_a_command_that_ends_before_the_watch_looks_still_names_the_bound(ctx: ToolContext,
                                                                             sandbox: str) -> None:
    # over the bound and done within a few ms, before the watch's next look: the result still says
    result = await run(registry(sandbox, processes=8), ctx,
                       "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 0.01 & done 2>/dev/null; wait")
    last = result.content.splitlines()[-1]
    if result.is_error:  # on a loaded machine the watch may still catch it running: stopped, said so
        assert last == "[stopped: the command went over the limit of 8 processes; everything it started was killed]"
    else:
        assert last.endswith("; the command went over the limit of 8 processes: some could not start]")
    assert not our_cgroups()


NOBODY = 65534
AS_NOBODY = """
import asyncio, json, os, sys
from pathlib import Path
from bot.llm import ToolCall
from bot.conversation import Conversation
from bot.tools import ExecSettings, ToolContext, builtin_registry
from bot.config.tools import ExecLimitsConfig

outer, ws, command = sys.argv[1:]
Path(outer, "cgroup.procs").write_text(str(os.getpid()))  # the safety net, and the count
os.setgroups([])
os.setresgid(NOBODY, NOBODY, NOBODY)
os.setresuid(NOBODY, NOBODY, NOBODY)
settings = ExecSettings(limits=ExecLimitsConfig(processes=32, cgroup=False))
registry = builtin_registry(exec_enabled=True, exec_settings=settings)
ctx = ToolContext(Path(ws), Conversation.of_key("agent:main:telegram:dm:42"), "run-1", "main", "42",
                  sender_is_owner=True)

async def main():
    results = []
    for call in ("id -u", command):
        [result] = await registry.execute([ToolCall("c", "exec", json.dumps({"command": call, "timeout": 3}))], ctx)
        results.append([result.content, result.is_error])
    return results

print(json.dumps(asyncio.run(main())))
""".replace("NOBODY", str(NOBODY))


@pytest.fixture
def nobody(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A workspace uid 65534 may write, and an outer pids cgroup to run the bot in as that uid
    (a safety net, and a count of what the sandbox really started)."""
    if os.geteuid() != 0 or host_cgroups().pids is None:
        pytest.skip("needs root (to become another uid) and a pids cgroup to test a non-root bot")
    outer = host_cgroups().pids / f"chatgate-test-{os.getpid()}-{tmp_path.name}"  # type: ignore[operator]
    outer.mkdir()
    (outer / "pids.max").write_text("400")
    top = Path(tempfile.mkdtemp(prefix="chatgate-nobody-"))  # in /tmp: a path uid 65534 may walk
    try:
        top.chmod(0o755)
        ws = top / "ws"
        ws.mkdir()
        os.chown(ws, NOBODY, NOBODY)
        yield ws, outer
    finally:
        shutil.rmtree(top, ignore_errors=True)
        for _ in range(50):
            try:
                outer.rmdir()
                break
            except OSError:
                time.sleep(0.02)


def test_without_a_cgroup_a_non_root_bot_bounds_the_sandboxs_processes(nobody: tuple[Path, Path]) -> None:
    # No cgroup, a bot that is not root: RLIMIT_NPROC, set on the sandbox's pid 1 inside its
    # user namespace, holds the bomb to 32 processes until the timeout (3 s), whatever the
    # bot's user runs besides. (Root is exempt from RLIMIT_NPROC: see bot.tools.bounds.)
    ws, outer = nobody
    mark = marker()
    done = subprocess.run([sys.executable, "-c", AS_NOBODY, str(outer), str(ws), f"sleep {mark} & {BOMB}; wait"],
                          cwd=ROOT, capture_output=True, text=True, timeout=25, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    [(who, _), (content, is_error)] = json.loads(done.stdout.splitlines()[-1])
    assert who == f"{NOBODY}\n[exit code 0]"
    assert is_error and "[timed out after 3 s; the command was killed]" in content
    assert not pids_of(mark)
    assert (outer / "pids.events").read_text().split() == ["max", "0"], "the safety net had to stop it"
    peak = int((outer / "pids.peak").read_text())
    assert peak <= 32 + 8, f"{peak} processes: RLIMIT_NPROC did not hold"  # + the bot, its threads, bwrap


def test_root_without_a_cgroup_is_warned_that_processes_are_unbounded() -> None:
    missing = unenforced(ExecLimitsConfig(), sandboxed=True, root=CgroupRoot())
    if os.geteuid() == 0:
        assert missing == ["tools.exec.limits.processes (the bot runs as root and has no cgroup it may make: "
                           "only the timeout ends a fork bomb)"]
    else:
        assert missing == []
    assert unenforced(ExecLimitsConfig(), sandboxed=False, root=CgroupRoot())[0].startswith(
        "tools.exec.limits.processes (tools.exec.sandbox is none")
    assert unenforced(ExecLimitsConfig(processes=None), sandboxed=False, root=CgroupRoot()) == []
    assert unenforced(ExecLimitsConfig(), sandboxed=False, root=CgroupRoot(pids=Path("/x"))) == []


# -- a 10 GB dd -------------------------------------------------------------------------------

async def test_dd_into_tmp_stops_at_the_tmp_bound(ctx: ToolContext) -> None:
    reg = registry(tmp_mb=16, file_size_mb=64)
    started = time.monotonic()
    result = await run(reg, ctx, TEN_GB.format(to="/tmp/big"))
    assert time.monotonic() - started < 10
    assert "No space left on device" in result.content and not result.is_error
    assert result.content.endswith("[exit code 1; /tmp is full (it holds at most 16 MB; "
                                   "keep big files in the workspace)]")
    assert not any(ctx.workspace.iterdir())  # nothing reached the disk
    # the bound holds for the next command too, and a small file is fine
    assert (await run(reg, ctx, "head -c 1000000 /dev/zero > /tmp/x && wc -c < /tmp/x")).content == \
        "1000000\n[exit code 0]"


async def test_dd_into_the_workspace_stops_at_the_file_size_bound(ctx: ToolContext, sandbox: str) -> None:
    reg = registry(sandbox, file_size_mb=8)
    result = await run(reg, ctx, TEN_GB.format(to="big"))
    assert (ctx.workspace / "big").stat().st_size == 8 << 20
    assert result.content.endswith("; a file reached the size limit (8 MB per file)]")
    assert "[killed by signal SIGXFSZ;" in result.content or "[exit code 153;" in result.content
    # what the model reads, complete
    assert "[killed by signal SIGXFSZ; a file reached the size limit (8 MB per file)]" in result.content \
        or sandbox == "none"


# -- a memory hog -----------------------------------------------------------------------------

@needs_cgroup
async def test_memory_hog_is_killed_at_the_memory_bound(ctx: ToolContext, sandbox: str) -> None:
    reg = registry(sandbox, memory_mb=128)
    started = time.monotonic()
    result = await run(reg, ctx, 'python3 -c "x = bytearray(4 << 30)"; echo "exit $?"')
    assert time.monotonic() - started < 15
    assert "exit 137" in result.content  # SIGKILL from the OOM killer, in the cgroup only
    assert result.content.endswith("[exit code 0; a process was killed for going over the memory limit (128 MB)]")
    assert not our_cgroups()


async def test_memory_hog_without_a_cgroup_fails_its_allocation(ctx: ToolContext, sandbox: str) -> None:
    reg = registry(sandbox, memory_mb=128, cgroup=False)
    result = await run(reg, ctx, 'python3 -c "x = bytearray(4 << 30)"')
    assert "MemoryError" in result.content and result.content.endswith("[exit code 1]")
    # a pipe whose reader keeps everything (no newline ever comes) runs out the same way
    tail = await run(reg, ctx, "head -c 5G /dev/zero | tail")
    assert "memory exhausted" in tail.content and tail.content.endswith("[exit code 1]")


# -- small commands are not bothered ----------------------------------------------------------

async def test_limits_are_in_place_and_ordinary_commands_pass(ctx: ToolContext) -> None:
    reg = registry(processes=100, memory_mb=512, file_size_mb=10, tmp_mb=20, cgroup=False)
    result = await run(reg, ctx, "ulimit -f; ulimit -v; ulimit -p; df -k /tmp | tail -1 | awk '{print $2}'")
    assert result.content == f"{10 * 2048}\n{512 * 1024}\n100\n{20 * 1024}\n[exit code 0]"
    assert (await run(reg, ctx, "for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait; echo ok")).content == \
        "ok\n[exit code 0]"
    assert "Limits: 100 processes, 512 MB of memory, files up to 10 MB, /tmp up to 20 MB." in \
        reg.get("exec").description


@needs_cgroup
async def test_a_command_runs_in_a_cgroup_of_its_own_and_it_goes_away(ctx: ToolContext, sandbox: str) -> None:
    reg = registry(sandbox, processes=50, memory_mb=256)
    result = await run(reg, ctx, "cat /proc/self/cgroup")
    lines = result.content.splitlines()
    assert any(line.split(":")[1] == "pids" and "/chatgate-exec-" in line for line in lines), lines
    assert not our_cgroups()


def test_bwrap_mounts_tmp_with_its_size() -> None:
    args = bwrap_arguments(Path("/w"), ExecSettings(limits=ExecLimitsConfig(tmp_mb=3)))
    at = args.index("--tmpfs")
    assert args[at - 2:at + 2] == ["--size", str(3 << 20), "--tmpfs", "/tmp"]
    assert "--size" not in bwrap_arguments(Path("/w"), ExecSettings(limits=ExecLimitsConfig(tmp_mb=None)))
    assert bwrap_arguments(Path("/w"), ExecSettings(), block_fd=7)[-2:] == ["--block-fd", "7"]


def test_rlimits_depend_on_the_cgroup_and_the_sandbox() -> None:
    import resource

    plain = CommandLimits(ExecLimitsConfig(), sandboxed=True)
    assert dict(plain.rlimits()) == {resource.RLIMIT_FSIZE: 512 << 20, resource.RLIMIT_AS: 1024 << 20,
                                     resource.RLIMIT_NPROC: 256}
    # unsandboxed, RLIMIT_NPROC would count the bot's own processes: not used
    assert resource.RLIMIT_NPROC not in dict(CommandLimits(ExecLimitsConfig(), sandboxed=False).rlimits())
    assert list(CommandLimits(ExecLimitsConfig(processes=None, memory_mb=None, file_size_mb=None, tmp_mb=None), sandboxed=True).rlimits()) == []


# -- finding a cgroup ---------------------------------------------------------------------------

def fake_proc(proc: Path, cgroup: str, mounts: list[str]) -> Path:
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("".join(f"{i} 1 0:{i} {m}\n" for i, m in enumerate(mounts, 30)))
    return proc


def test_find_cgroups_v1_uses_the_bots_own_cgroup(tmp_path: Path) -> None:
    pids, memory = tmp_path / "pids", tmp_path / "memory"
    for d in (pids / "a", memory / "c"):  # the memory mount shows the hierarchy from /b down
        d.mkdir(parents=True)
        (d / "cgroup.procs").write_text("")
    proc = fake_proc(tmp_path / "proc", "8:pids:/a\n4:memory:/b/c\n0::/\n",
                     [f"/ {pids} rw - cgroup cgroup rw,pids", f"/b {memory} rw - cgroup cgroup rw,memory",
                      "/ /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw"])
    assert find_cgroups(proc) == CgroupRoot(pids=pids / "a", memory=memory / "c", version=1)
    assert [p.name for p in (pids / "a").iterdir()] == ["cgroup.procs"]  # the probe was removed again
    # v2 only, in the root or not delegated: nowhere
    assert not find_cgroups(fake_proc(tmp_path / "v2", "0::/\n", [f"/ {tmp_path} rw - cgroup2 cgroup2 rw"]))
    assert not find_cgroups(fake_proc(tmp_path / "v2b", "0::/a\n", [f"/ {pids} rw - cgroup2 cgroup2 rw"]))
    assert not find_cgroups(tmp_path / "no-such-proc")


# -- config ------------------------------------------------------------------------------------

KEY = {"OPENAI_API_KEY": "sk-test-0000000000000000wxyz"}


def test_config_defaults_are_the_tools_defaults() -> None:
    limits = Config().tools.exec.limits
    assert (limits.processes, limits.memory_mb, limits.file_size_mb, limits.tmp_mb, limits.cgroup) == \
        (256, 1024, 512, 256, True)
    assert Config().exec_settings().limits == ExecLimitsConfig()


def test_config_reads_the_limits(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("tools:\n  exec:\n    enabled: true\n    limits:\n      processes: 64\n      memory_mb: null\n"
                    "      file_size_mb: 100\n      tmp_mb: 32\n      cgroup: false\n")
    config = load_config(path, env=KEY)
    assert config.exec_settings().limits == ExecLimitsConfig(processes=64, memory_mb=None, file_size_mb=100, tmp_mb=32,
                                                       cgroup=False)
    assert "limits 64 processes, files up to 100 MB, /tmp up to 32 MB" in config.describe()


@pytest.mark.parametrize(("yaml", "expected"), [
    ("memory: 512", 'tools.exec.limits.memory: unknown key (did you mean "memory_mb"?)'),
    ("procs: 10", "tools.exec.limits.procs: unknown key"),
    ("processes: 2", "tools.exec.limits.processes:"),
    ("tmp_mb: lots", "tools.exec.limits.tmp_mb:"),
])
def test_config_names_a_wrong_limit(tmp_path: Path, yaml: str, expected: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"tools:\n  exec:\n    limits:\n      {yaml}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=KEY)
    assert str(caught.value).startswith(expected), str(caught.value)
