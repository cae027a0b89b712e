"""The exec tool, sandboxed (bubblewrap) and unsandboxed (``sandbox: none``): output and exit
code, the workspace as cwd, no secrets, timeouts, the output cap, nothing left running after
a cancel (``/stop``). The sandbox's promises end to end (the agent loop, the fake LLM, a key in the bot's
environment) are at the end."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.events import EventBus
from bot.agent.loop import Agent, AgentSettings, RunRequest
from bot.app import BUILTIN_TEMPLATES
from bot.conversation import Conversation
from bot.errors import ConfigError
from bot.llm import ToolCall, ToolResult
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers import make_provider
from bot.settings import load_config
from bot.store.sqlite import SQLiteStore
from bot.tools import ExecSettings, ToolCategory, ToolContext, ToolRegistry, builtin_registry
from bot.tools import exec as exec_tool
from bot.tools.sandbox import bwrap_arguments, require_sandbox
from bot.workspace import Workspaces
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.procs import alive, all_dead, marker, pids_running

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(ws, Conversation.of_key("agent:main:telegram:dm:42"), "run-1", "main", "42", sender_is_owner=True)


@pytest.fixture(params=["bwrap", "none"])
def sandbox(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def registry(sandbox: str) -> ToolRegistry:
    return builtin_registry(exec_enabled=True, exec_settings=ExecSettings(sandbox=sandbox))  # type: ignore[arg-type]


def home(ctx: ToolContext, sandbox: str) -> str:
    return "/workspace" if sandbox == "bwrap" else os.path.realpath(ctx.workspace)


async def run(registry: ToolRegistry, ctx: ToolContext, command: str, **extra: object) -> ToolResult:
    arguments = json.dumps({"command": command, **extra})
    [result] = await registry.execute([ToolCall("call-1", "exec", arguments)], ctx)
    return result


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
    exec_command = on.get("exec")
    assert exec_command is not None
    built = builtin_registry(exec_enabled=True, exec_settings=ExecSettings(sandbox="none")).get("exec")
    assert built.name == "exec" and built.parameters == exec_command.parameters
    assert "mounted at /workspace" in exec_command.description and "no network" in exec_command.description
    assert "sandbox" not in built.description  # unsandboxed, the model is told nothing it cannot rely on
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


async def test_cwd_and_home_are_the_workspace(registry: ToolRegistry, ctx: ToolContext, sandbox: str) -> None:
    result = await run(registry, ctx, 'pwd; echo "$HOME"; echo hi > made.txt; readlink /proc/self/fd/0')
    real = home(ctx, sandbox)
    assert result.content == f"{real}\n{real}\n/dev/null\n[exit code 0]"
    assert (ctx.workspace / "made.txt").read_text() == "hi\n"


async def test_invalid_utf8_is_replaced(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, r"printf 'a\377b\n'")
    assert result.content == "a\ufffdb\n[exit code 0]"


# -- environment ---------------------------------------------------------------------------

async def test_environment_has_no_secrets(registry: ToolRegistry, ctx: ToolContext, sandbox: str,
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
    assert f"HOME={home(ctx, sandbox)}" in result.content.splitlines()
    if sandbox == "none":
        assert "PATH=/usr/bin:/bin" in result.content.splitlines()
    else:  # nothing inherited: PATH, HOME and LANG (the shell adds PWD)
        assert names == {"PATH", "HOME", "LANG", "PWD"}


def test_environment_is_an_allowlist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = {"PATH": "/x/bin", "LANG": "de_DE.UTF-8", "TZ": "UTC", "HOME": "/root", "TERM": "xterm",
              "ANTHROPIC_API_KEY": "k", "SLACK_APP_TOKEN": "t", "GITHUB_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
              "DISCORD_BOT_TOKEN": "t", "USER": "bot"}
    monkeypatch.setattr(os, "environ", source)
    env = exec_tool.exec_environment(tmp_path)
    assert env == {"PATH": "/x/bin", "LANG": "de_DE.UTF-8", "TZ": "UTC", "HOME": str(tmp_path),
                   "TERM": "dumb", "TMPDIR": env["TMPDIR"]}
    monkeypatch.setattr(os, "environ", {})
    assert exec_tool.exec_environment(tmp_path)["PATH"]  # a usable PATH even when ours is unset


# -- refusals ----------------------------------------------------------------------------

async def test_empty_command_and_bad_timeout_refused(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "   ")
    assert result.is_error and "empty" in result.content
    result = await run(registry, ctx, "echo hi", timeout=0)
    assert result.is_error and "timeout" in result.content


# -- timeout ---------------------------------------------------------------------------

async def test_timeout_kills_the_group_and_keeps_the_output(registry: ToolRegistry, ctx: ToolContext,
                                                             sandbox: str) -> None:
    bg, fg, detached = marker(), marker(), marker()
    started = time.monotonic()
    result = await run(registry, ctx, f"echo before; sleep {bg} & setsid sleep {detached} & sleep {fg}", timeout=1)
    assert 0.9 < time.monotonic() - started < 3
    assert result.is_error
    assert result.content == "before\n[timed out after 1 s; the command was killed]"
    assert await all_dead(bg, fg)
    assert await all_dead(detached) or sandbox == "none"  # unsandboxed, a setsid child leaves the group


async def test_timeout_capped_by_module_cap(registry: ToolRegistry, ctx: ToolContext,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exec_tool, "MAX_TIMEOUT", 0.5)
    started = time.monotonic()
    result = await run(registry, ctx, "sleep 30", timeout=600)
    assert result.is_error and "timed out after 0.5 s" in result.content
    assert time.monotonic() - started < 2


async def test_sigterm_ignored_then_sigkill(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unsandboxed, the shell gets SIGTERM and a grace period (a sandbox is killed at once)."""
    registry = builtin_registry(exec_enabled=True, exec_settings=ExecSettings(sandbox="none"))
    monkeypatch.setattr(exec_tool, "KILL_GRACE", 0.3)
    started = time.monotonic()
    result = await run(registry, ctx, "trap '' TERM; echo $$ > sh.pid; while :; do sleep 0.05; done", timeout=1)
    assert result.is_error and "timed out" in result.content
    assert 1.2 < time.monotonic() - started < 3
    assert not alive(int((ctx.workspace / "sh.pid").read_text()))


# -- background children ----------------------------------------------------------------

async def test_background_child_does_not_hold_the_call(registry: ToolRegistry, ctx: ToolContext) -> None:
    """The shell exits at once; its background child (which holds stdout) is killed with the group."""
    bg = marker()
    started = time.monotonic()
    result = await run(registry, ctx, f"sleep {bg} & echo done")
    assert time.monotonic() - started < 2
    assert result.content == "done\n[exit code 0]"
    assert await all_dead(bg)


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
async def test_cancel_kills_shell_and_grandchildren(registry: ToolRegistry, ctx: ToolContext, sandbox: str,
                                                    via_registry: bool) -> None:
    shell, child, detached = marker(), marker(), marker()
    # unsandboxed, a setsid child would leave the group and outlive the call: only the sandbox promises that
    escape = f"setsid sleep {detached} & " if sandbox == "bwrap" else f"sleep {detached} & "
    command = f"sleep {child} & {escape}sleep {shell}; echo never"
    if via_registry:
        task = asyncio.create_task(run(registry, ctx, command))
    else:
        task = asyncio.create_task(registry.get("exec").function(ctx, command=command))
    await pids_running(shell, child, detached)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1
    assert await all_dead(shell, child, detached)


async def test_registry_timeout_is_a_cancel_too(ctx: ToolContext, sandbox: str) -> None:
    """The registry's own limit cancels the tool: everything dies all the same."""
    registry = builtin_registry(exec_enabled=True, timeouts={ToolCategory.EXEC: 0.5},
                                exec_settings=ExecSettings(sandbox=sandbox))  # type: ignore[arg-type]
    shell, child = marker(), marker()
    result = await run(registry, ctx, f"sleep {child} & sleep {shell}")
    assert result.is_error and result.content == "exec timed out after 0.5 s"
    assert await all_dead(shell, child)


async def test_owners_only_refuses_others(ctx: ToolContext) -> None:
    registry = builtin_registry(exec_enabled=True)
    stranger = ToolContext(ctx.workspace, Conversation.of_key(ctx.session_key), "run-2", "main", "7")
    result = await run(registry, stranger, "touch ran")
    assert result.is_error and "only the bot's owners" in result.content
    assert not (ctx.workspace / "ran").exists()
    open_to_all = builtin_registry(exec_enabled=True, exec_settings=ExecSettings(owners_only=False))
    assert (await run(open_to_all, stranger, "echo ok")).content == "ok\n[exit code 0]"


async def test_command_is_logged_redacted(registry: ToolRegistry, ctx: ToolContext,
                                          caplog: pytest.LogCaptureFixture) -> None:
    key = "sk-" + "a1B2" * 10
    with caplog.at_level("INFO", logger="bot.tools.exec"):
        await run(registry, ctx, f"echo {key} > /dev/null")
    assert "echo *** > /dev/null" in caplog.text and key not in caplog.text



# -- the sandbox end to end: the agent loop, the fake LLM, a deployment's secrets ---------

KEY = "sk-live-" + "Zq7" * 12  # what a deployment puts in the bot's environment
TOKEN = "123456789:" + "AAH" * 12


class Bot:
    """An agent as ``chatgate run`` builds it: config file, database, workspace root, keys in env."""

    def __init__(self, tmp_path: Path, llm: FakeLLM, settings: ExecSettings) -> None:
        self.tmp_path, self.llm = tmp_path, llm
        self.config = tmp_path / "etc" / "config.yaml"
        self.config.parent.mkdir(parents=True)
        self.config.write_text(f"providers: {{openai: {{api_key: {KEY}}}}}\n")
        self.data = tmp_path / "data"
        self.root = tmp_path / "workspaces"
        self.settings = ExecSettings(sandbox=settings.sandbox, network=settings.network,
                                     private=(self.config, self.data, self.root))
        self.runs = 0

    async def __aenter__(self) -> Bot:
        self.store = await SQLiteStore(self.data / "chatgate.db").__aenter__()
        self.provider = make_provider("openai", api_key=KEY, base_url=self.llm.openai_base_url, timeout=10,
                                      max_retries=0)
        tools = builtin_registry(exec_enabled=True, exec_settings=self.settings)
        self.agent = Agent(AgentSettings("main", "openai", "fake-model"), self.provider, self.store, EventBus(),
                           tools, Workspaces(self.root, BUILTIN_TEMPLATES), lambda model, usage: 0.0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.provider.aclose()
        await self.store.__aexit__(None, None, None)

    async def run(self, *commands: str, user: str = "42") -> list[str]:
        """One run in which the model calls exec once per command; the results it reads back."""
        self.runs += 1
        msg = InboundMessage("telegram", "bot", user, ChatType.DM, Sender(user, "Owner"), "go", f"m{self.runs}")
        key = f"agent:main:telegram:dm:{user}"
        self.llm.script(Reply.tool_calls([Call("exec", {"command": c}, id=f"c{i}") for i, c in enumerate(commands)]),
                        Reply.text("done"))
        before = len(self.llm.requests)
        await self.agent.complete(RunRequest(f"run{self.runs}", await self.store.session(key), Conversation.of_key(key), (msg,),
                                        sender_is_owner=True))
        tool_messages = [m for m in self.llm.requests[before + 1].body["messages"] if m["role"] == "tool"]
        return [m["content"] for m in tool_messages]


@pytest.fixture
async def bot(tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Bot]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    async with Bot(tmp_path, llm, ExecSettings()) as b:
        yield b


async def test_sandbox_cannot_print_the_bots_keys(bot: Bot) -> None:
    [out] = await bot.run("cat /proc/$PPID/environ; echo; env; cat /proc/1/environ; echo; "
                          "cat /proc/*/environ; echo; ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline")
    assert "PATH=" in out and "HOME=/workspace" in out  # the commands ran
    for secret in (KEY, TOKEN, "Zq7Zq7", "AAHAAH"):
        assert secret not in out
    assert "bwrap\x00--args" in out and str(bot.tmp_path) not in out  # bwrap's own command line hides the host paths


async def test_sandbox_cannot_read_the_config_the_database_or_another_workspace(bot: Bot) -> None:
    other = bot.root / "telegram-99"
    other.mkdir(parents=True)
    (other / "diary.md").write_text("the neighbour's secret")
    reads, listing, writes = await bot.run(
        f"cat {bot.config} {other}/diary.md ../telegram-99/diary.md {bot.data}/chatgate.db",
        f"ls -A /; ls -A {bot.data} {bot.root} /root /home 2>/dev/null; echo end",
        "echo mine > mine.txt && cat mine.txt; for d in / /usr /etc /proc; do touch $d/x 2>/dev/null && echo $d; done; true")
    assert reads.count("No such file or directory") == 4 and reads.endswith("[exit code 1]")
    assert KEY not in reads and "neighbour" not in reads and "SQLite" not in reads
    assert listing.endswith("end\n[exit code 0]") and set(listing.split()[:-4]) <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "tmp",
                                         "proc", "dev", "workspace"}  # nothing else of the host
    assert writes == "mine\n[exit code 0]"  # the workspace is writable, nothing else is
    assert (bot.root / "telegram-42" / "mine.txt").read_text() == "mine\n"


async def test_sandbox_tmp_is_private_to_each_call(bot: Bot) -> None:
    name = f"chatgate-probe-{os.getpid()}"
    first, second = await bot.run(f"echo one > /tmp/{name}; ls /tmp", "ls -A /tmp; echo end")
    assert first == f"{name}\n[exit code 0]" and second == "end\n[exit code 0]"
    assert not Path(f"/tmp/{name}").exists()


async def test_sandbox_network_is_off_unless_asked(tmp_path: Path, llm: FakeLLM) -> None:
    port = int(llm.openai_base_url.split(":")[2].split("/")[0])
    probe = ("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; "
             f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"connected\")'")
    async with Bot(tmp_path / "off", llm, ExecSettings()) as off:
        [out] = await off.run(probe)
    assert out.splitlines()[0] == "lo" and "connected" not in out
    async with Bot(tmp_path / "on", llm, ExecSettings(network=True)) as on:
        [out] = await on.run(probe)
    assert "connected" in out


@pytest.mark.parametrize("how", ["stop", "timeout"])
async def test_sandbox_setsid_children_die_on_stop_and_timeout(bot: Bot, how: str) -> None:
    shell, child, detached = marker(), marker(), marker()
    command = f"sleep {child} & setsid sleep {detached} & (setsid sh -c 'sleep {detached}' &); sleep {shell}"
    if how == "timeout":
        bot.llm.script(Reply.tool_calls([Call("exec", {"command": command, "timeout": 1}, id="c1")]),
                       Reply.text("done"))
        msg = InboundMessage("telegram", "bot", "42", ChatType.DM, Sender("42", "Owner"), "go", "t1")
        key = "agent:main:telegram:dm:42"
        await bot.agent.complete(RunRequest("run-t", await bot.store.session(key), Conversation.of_key(key), (msg,), sender_is_owner=True))
        assert "timed out after 1 s" in json.dumps(bot.llm.requests[-1].body["messages"])
    else:  # /stop cancels the run's task
        run = asyncio.create_task(bot.run(command))
        await pids_running(shell, child, detached)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert await all_dead(shell, child, detached)


async def test_sandbox_none_must_be_explicit_and_works(tmp_path: Path, llm: FakeLLM) -> None:
    assert ExecSettings().sandbox == "bwrap"
    async with Bot(tmp_path, llm, ExecSettings(sandbox="none")) as b:
        [out] = await b.run("pwd")
    assert out == f"{os.path.realpath(b.root / 'telegram-42')}\n[exit code 0]"


# -- start-up check and arguments ------------------------------------------------------------

def test_missing_bwrap_stops_start_up_naming_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        require_sandbox(ExecSettings(bwrap="bwrap-not-installed-here"))
    assert str(caught.value).startswith("tools.exec.sandbox: bwrap (bubblewrap) is not installed (")
    assert "apt-get install bubblewrap" in str(caught.value) and "\n" not in str(caught.value)
    require_sandbox(ExecSettings(sandbox="none", bwrap="bwrap-not-installed-here"))  # not needed: no error
    require_sandbox(ExecSettings())  # the real one works here


def test_bwrap_that_cannot_build_a_sandbox_stops_start_up(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(ConfigError) as caught:
        require_sandbox(ExecSettings(bwrap=str(fake)))
    assert "tools.exec.sandbox: bubblewrap cannot build its sandbox here: bwrap: No permissions" in str(caught.value)
    assert "seccomp=unconfined" in str(caught.value)


def test_bwrap_arguments_bind_only_the_system_and_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "host"
    for d in ("usr/bin", "usr/lib", "usr/local/etc/chatgate", "etc/ssl/certs", "etc/ssl/private", "home/bot", "root",
              "srv/data"):
        (root / d).mkdir(parents=True)
    for f in ("etc/passwd", "etc/shadow", "etc/chatgate.yaml", "usr/local/etc/chatgate/config.yaml"):
        (root / f).write_text("x")
    (root / "bin").symlink_to("usr/bin")
    private = (root / "usr/local/etc/chatgate/config.yaml", root / "srv/data")
    args = bwrap_arguments(Path("/w"), ExecSettings(private=private), root=root)
    joined = " ".join(args)
    assert f"--ro-bind {root}/usr /usr" in joined and "--symlink usr/bin /bin" in joined
    assert f"--ro-bind {root}/etc/passwd /etc/passwd" in joined and f"{root}/etc/ssl/certs /etc/ssl/certs" in joined
    for never in ("shadow", "chatgate.yaml", "home", "/root", "srv", "private"):
        assert never not in joined
    assert "--ro-bind /dev/null /usr/local/etc/chatgate/config.yaml" in joined  # covered up
    assert "--bind /w /workspace --remount-ro / --chdir /workspace --clearenv" in joined
    assert "--unshare-all" in args and "--share-net" not in args and "--die-with-parent" in args
    assert "--share-net" in bwrap_arguments(Path("/w"), ExecSettings(network=True), root=root)


async def test_sandbox_keeps_a_groups_persona_files_read_only_for_members(ctx: ToolContext) -> None:
    (ctx.workspace / "AGENTS.md").write_text("be kind\n")
    registry = builtin_registry(exec_enabled=True, exec_settings=ExecSettings(owners_only=False))
    member = ToolContext(ctx.workspace, Conversation.of_key("agent:main:telegram:group:-1"), "run-2", "main", "7")
    result = await run(registry, member, "echo obey > AGENTS.md; rm -f AGENTS.md; mv AGENTS.md x; cat AGENTS.md; "
                                         "echo fine > notes.md")
    assert "be kind" in result.content and (ctx.workspace / "AGENTS.md").read_text() == "be kind\n"
    assert (ctx.workspace / "notes.md").read_text() == "fine\n"
    owner = ToolContext(ctx.workspace, Conversation.of_key(member.session_key), "run-3", "main", "1",
                        sender_is_owner=True)
    await run(registry, owner, "echo owner > AGENTS.md")
    assert (ctx.workspace / "AGENTS.md").read_text() == "owner\n"


async def test_a_protected_file_is_bound_by_descriptor_so_a_link_swapped_in_leads_nowhere(
        ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.tools import exec as exec_module

    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's secret\n")
    (ctx.workspace / "AGENTS.md").write_text("be kind\n")
    real = exec_module._protected_files

    def swapped_after_the_check(c: ToolContext, workspace: Path) -> list[tuple[int, str]]:
        found = real(c, workspace)
        (workspace / "AGENTS.md").unlink()  # what a racing command in the same workspace could do
        (workspace / "AGENTS.md").symlink_to(secret)
        return found

    monkeypatch.setattr(exec_module, "_protected_files", swapped_after_the_check)
    registry = builtin_registry(exec_enabled=True, exec_settings=ExecSettings(owners_only=False))
    member = ToolContext(ctx.workspace, Conversation.of_key("agent:main:telegram:group:-1"), "run-2", "main", "7")
    result = await run(registry, member, "cat AGENTS.md")
    assert "secret" not in result.content  # bwrap refuses the vanished file: the command fails, nothing leaks
    (ctx.workspace / "AGENTS.md").unlink()
    (ctx.workspace / "AGENTS.md").write_text("be kind\n")
    monkeypatch.setattr(exec_module, "_protected_files", real)
    assert "be kind" in (await run(registry, member, "cat AGENTS.md")).content


# -- what of /etc/ssl a command sees, and the dashboard's TLS files (issue 32 item 13) -----------

async def test_sandbox_sees_the_certificates_but_not_etc_ssl_private(bot: Bot) -> None:
    trusted = "python3 -c 'import ssl; print(ssl.create_default_context().cert_store_stats()[\"x509_ca\"] > 0)'"
    [out] = await bot.run(f"ls -d /etc/ssl/private 2>&1; head -1 /etc/ssl/certs/ca-certificates.crt; {trusted}")
    assert "ls: cannot access '/etc/ssl/private': No such file or directory" in out, out
    assert "-----BEGIN CERTIFICATE-----" in out and out.endswith("True\n[exit code 0]"), out


def fake_host(tmp_path: Path) -> Path:
    """A host root for bubblewrap: this machine's /usr and system links, a little of /etc,
    and an /etc/ssl whose private/ holds a key and whose certs/ holds the dashboard's certificate."""
    root = tmp_path / "host"
    (root / "etc/ssl/private").mkdir(parents=True)
    (root / "etc/ssl/certs").mkdir()
    (root / "usr").symlink_to("/usr")
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink(f"/{top}"):
            (root / top).symlink_to(os.readlink(f"/{top}"))
    for name in ("passwd", "group", "ld.so.cache"):
        (root / "etc" / name).symlink_to(f"/etc/{name}")
    (root / "etc/ssl/certs/ca.pem").write_text("-----BEGIN CERTIFICATE-----\nroot\n")
    (root / "etc/ssl/certs/dashboard.pem").write_text("-----BEGIN CERTIFICATE-----\ndashboard\n")
    (root / "etc/ssl/private/dashboard.key").write_text("-----BEGIN PRIVATE KEY-----\nTOPSECRET\n")
    return root


def test_the_dashboards_tls_files_are_hidden_from_a_sandboxed_command(tmp_path: Path) -> None:
    root = fake_host(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(f"""
providers: {{openai: {{api_key: test-key}}}}
storage: {{path: "{tmp_path / 'data' / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
tools: {{exec: {{enabled: true}}}}
dashboard: {{tls_cert: "{root}/etc/ssl/certs/dashboard.pem", tls_key: "{root}/etc/ssl/private/dashboard.key"}}
""")
    settings = load_config(config, env={}).exec_settings()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    args = bwrap_arguments(workspace, settings, root=root)
    command = ("cat /etc/ssl/private/dashboard.key /etc/ssl/certs/dashboard.pem; ls -A /etc/ssl/private; "
               "cat /etc/ssl/certs/ca.pem")
    done = subprocess.run([settings.bwrap, *args, "--", "/bin/sh", "-c", command], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=10, check=False)
    out = done.stdout + done.stderr
    assert "TOPSECRET" not in out and "dashboard\n" not in out, out
    assert "-----BEGIN CERTIFICATE-----\nroot\n" in out, out  # the other certificates are there
