"""`chatgate` as a user runs it: a real process on a pseudo-terminal, against the fake LLM."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.llm_server import Call, FakeLLM, Reply

ROOT = Path(__file__).resolve().parent.parent


class Terminal:
    """A chatgate process whose stdin/stdout is a pseudo-terminal we type into."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-m", "bot", *args], stdin=slave, stdout=slave, stderr=slave,
                                     cwd=cwd, env=env, start_new_session=True)
        os.close(slave)
        os.set_blocking(master, False)
        self.fd = master
        self.output = ""

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    async def expect(self, text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; screen so far:\n{self.output}")
            try:
                self.output += os.read(self.fd, 65536).decode(errors="replace")
            except (BlockingIOError, OSError):
                await asyncio.sleep(0.02)

    def drain(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            self.output += data.decode(errors="replace")

    async def exit_code(self, timeout: float = 6.0) -> int:
        deadline = time.monotonic() + timeout
        while (code := self.proc.poll()) is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"process still running after {timeout} s; screen:\n{self.output}")
            self.drain()  # so the process never blocks on a full terminal
            await asyncio.sleep(0.02)
        self.drain()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.fd)


def base_env(**extra: str) -> dict[str, str]:
    """The environment without credentials; ``python -m bot`` run from elsewhere imports this
    tree (not whatever checkout an editable install points at)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))}
    # `python -m bot` in a temporary directory runs this tree's bot, not whichever is installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    env.update(extra)
    return env


@pytest.fixture
def chat_env(llm: FakeLLM) -> dict[str, str]:
    return base_env(OPENAI_API_KEY="test-key", OPENAI_BASE_URL=llm.openai_base_url, CHATGATE_MODEL="fake-model")


async def test_chat_streams_stops_and_exits(tmp_path: Path, llm: FakeLLM, chat_env: dict[str, str]) -> None:
    term = Terminal(["chat"], tmp_path, chat_env)
    try:
        await term.expect("you › ")
        term.type("hello\n")
        await term.expect("echo: hello")

        llm.script(Reply.text("once upon a time " * 40, delay=0.05))
        term.type("tell me a story\n")
        await term.expect("once upon")
        term.proc.send_signal(signal.SIGINT)  # Ctrl-C stops the answer, not the program
        await asyncio.wait_for(llm.requests[1].disconnected.wait(), 2.0)
        await term.expect("Stopped.")
        assert term.proc.poll() is None

        term.type("/stop\n")
        await term.expect("Nothing is running.")
        term.type("\x04")  # Ctrl-D
        assert await term.exit_code() == 0
    finally:
        term.close()
    assert (tmp_path / "data" / "chatgate.db").exists()


async def test_chat_history_survives_a_restart(tmp_path: Path, llm: FakeLLM, chat_env: dict[str, str]) -> None:
    for text in ("my name is Ann", "what is my name?"):
        term = Terminal(["chat"], tmp_path, chat_env)
        try:
            await term.expect("you › ")
            term.type(text + "\n")
            await term.expect(f"echo: {text}")
            term.type("\x04")
            assert await term.exit_code() == 0
        finally:
            term.close()
    assert "my name is Ann" in str([m for m in llm.requests[1].body["messages"] if m["role"] != "system"])


async def test_chat_new_starts_fresh(tmp_path: Path, llm: FakeLLM, chat_env: dict[str, str]) -> None:
    term = Terminal(["chat"], tmp_path, chat_env)
    try:
        await term.expect("you › ")
        term.type("first\n")
        await term.expect("echo: first")
        term.type("/new\n")
        await term.expect("Started a fresh conversation.")
        term.type("second\n")
        await term.expect("echo: second")
    finally:
        term.close()
    assert "first" not in str([m for m in llm.requests[1].body["messages"] if m["role"] != "system"])


async def test_run_shuts_down_cleanly_on_sigterm(tmp_path: Path, llm: FakeLLM) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}"}}}}
channels: {{console: {{enabled: true}}}}
""")
    term = Terminal(["run", "-c", str(config)], tmp_path, base_env())
    try:
        await term.expect("you › ")
        llm.script(Reply.hang())
        term.type("are you there?\n")
        await llm.wait_for_requests(1, timeout=5)
        started = time.monotonic()
        term.proc.send_signal(signal.SIGTERM)
        assert await term.exit_code(timeout=6) == 0
        assert time.monotonic() - started < 5
        await asyncio.wait_for(llm.requests[0].disconnected.wait(), 2.0)  # the run's stream was closed
    finally:
        term.close()
    assert "shutting down" in term.output


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, env=env or base_env(), capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_check_masks_secrets(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agent: {model: gpt-4o-mini}\n")
    done = run_cli("check", "-c", str(config), cwd=tmp_path, env=base_env(OPENAI_API_KEY="sk-secret-value-1234567890"))
    assert done.returncode == 0, done.stderr
    assert "gpt-4o-mini" in done.stdout and "sk-secret-value" not in done.stdout


def test_check_warns_about_an_unsandboxed_exec(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("tools: {exec: {enabled: true, sandbox: none}}\n")
    done = run_cli("check", "-c", str(config), cwd=tmp_path, env=base_env(OPENAI_API_KEY="k"))
    assert done.returncode == 0, done.stderr
    assert "exec on: sandbox none, network off, owners only" in done.stdout
    assert done.stderr.startswith("warning: tools.exec.sandbox is none: commands run unconfined")
    config.write_text("tools: {exec: {enabled: true}}\n")
    done = run_cli("check", "-c", str(config), cwd=tmp_path, env=base_env(OPENAI_API_KEY="k"))
    assert done.returncode == 0 and "sandbox bwrap" in done.stdout and not done.stderr, done.stderr


def test_exec_without_bubblewrap_stops_start_up_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("tools: {exec: {enabled: true}}\nchannels: {telegram: {enabled: true, token: '1:x'}}\n")
    env = base_env(OPENAI_API_KEY="k")
    env["PATH"] = str(tmp_path)  # no bwrap on it
    for command in ("run", "check"):
        done = run_cli(command, "-c", str(config), cwd=tmp_path, env=env)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("chatgate: tools.exec.sandbox: bwrap (bubblewrap) is not installed (install")
        assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize(("yaml", "line"), [
    ("agent: {modle: x}\n", 'agent.modle: unknown key (did you mean "model"?)'),
    ("runs: {max_concurrent: lots}\n", "runs.max_concurrent: "),
    ("channels: {telegram: {enabled: true}}\n", "channels.telegram.token: missing (set TELEGRAM_BOT_TOKEN)"),
])
def test_config_mistakes_exit_2_with_one_line(tmp_path: Path, yaml: str, line: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml)
    done = run_cli("run", "-c", str(config), cwd=tmp_path, env=base_env(OPENAI_API_KEY="k"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"chatgate: {line}") and done.stderr.count("\n") == 1, done.stderr


def test_a_workspace_root_that_takes_no_files_stops_start_up_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    config = tmp_path / "config.yaml"
    config.write_text(f"workspace: {{root: '{tmp_path / 'a-file' / 'workspaces'}'}}\n"
                      "channels: {telegram: {enabled: true, token: '1:x', base_url: 'http://127.0.0.1:9'}}\n")
    done = run_cli("run", "-c", str(config), cwd=tmp_path, env=base_env(OPENAI_API_KEY="k"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"chatgate: workspace.root: {tmp_path / 'a-file' / 'workspaces'} is not writable")
    assert "several instances need one they all share" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_chat_without_any_key_says_what_to_set(tmp_path: Path) -> None:
    done = run_cli("chat", cwd=tmp_path)
    assert done.returncode == 2
    assert "set OPENAI_API_KEY" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_an_enabled_channel_without_its_token_is_refused_before_start(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("channels: {discord: {enabled: true}}\n")
    done = run_cli("run", "-c", str(config), cwd=tmp_path, env=base_env(OPENAI_API_KEY="k"))
    assert done.returncode == 2 and "channels.discord.token: missing (set DISCORD_BOT_TOKEN)" in done.stderr, \
        done.stderr


async def test_traces_show_what_runs_did(tmp_path: Path, llm: FakeLLM, chat_env: dict[str, str]) -> None:
    term = Terminal(["chat"], tmp_path, chat_env)
    try:
        await term.expect("you › ")
        llm.script(Reply.tool_calls([Call("list_files", {"path": "."}, id="c1")]), Reply.text("There are six."))
        term.type("count the files\n")
        await term.expect("There are six.")
        assert "⚙ list_files" in term.output
        term.type("\x04")
        assert await term.exit_code() == 0
    finally:
        term.close()
    done = run_cli("traces", "--last", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "completed" in lines[0] and "fake-model" in lines[0] and "2 it" in lines[0]
    assert [line.split()[0] for line in lines[1:4]] == ["llm", "tool", "llm"]
    assert "list_files" in lines[2] and "AGENTS.md" in lines[2]  # the workspace was seeded
    assert all(" title " in line or line.startswith("    ") for line in lines[4:])  # the session's title, if made


async def test_a_message_cut_off_by_a_crash_is_answered_once_after_restart(tmp_path: Path, llm: FakeLLM,
                                                                          chat_env: dict[str, str]) -> None:
    term = Terminal(["chat"], tmp_path, chat_env)
    try:
        await term.expect("you › ")
        llm.script(Reply.hang())
        term.type("are you there?\n")
        await llm.wait_for_requests(1, timeout=5)
        term.proc.kill()  # SIGKILL mid-run: no cleanup at all
        term.proc.wait()
    finally:
        term.close()
    term = Terminal(["chat"], tmp_path, chat_env)
    try:
        await term.expect("echo: are you there?")  # answered on start-up, nobody typed anything
        term.type("\x04")
        assert await term.exit_code() == 0
    finally:
        term.close()
    assert term.output.count("echo: are you there?") == 1
    assert len(llm.requests) == 2
    term = Terminal(["chat"], tmp_path, chat_env)  # a third start answers nothing again
    try:
        await term.expect("you › ")
        term.type("\x04")
        assert await term.exit_code() == 0
    finally:
        term.close()
    assert len(llm.requests) == 2


async def test_a_message_too_old_to_recover_gets_a_note(tmp_path: Path, llm: FakeLLM) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}"}}}}
runs: {{recover_max_age: 0}}
""")
    term = Terminal(["chat", "-c", str(config)], tmp_path, base_env())
    try:
        await term.expect("you › ")
        llm.script(Reply.hang())
        term.type("what is the weather\n")
        await llm.wait_for_requests(1, timeout=5)
        term.proc.kill()
        term.proc.wait()
    finally:
        term.close()
    term = Terminal(["chat", "-c", str(config)], tmp_path, base_env())
    try:
        await term.expect("could answer your message (“what is the weather”). Please send it again.")
        term.type("\x04")
        assert await term.exit_code() == 0
    finally:
        term.close()
    assert len(llm.requests) == 1


async def test_sigterm_while_starting_is_a_clean_stop(tmp_path: Path, llm: FakeLLM) -> None:
    """A service manager may stop the bot before it is up: here it waits for a database
    another process has locked. SIGTERM then must close what was opened and exit 0."""
    db = tmp_path / "chatgate.db"
    config = tmp_path / "config.yaml"
    config.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}"}}}}
storage: {{path: "{db}"}}
channels: {{console: {{enabled: true}}}}
""")
    sqlite3.connect(db).close()
    locker = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import sqlite3, sys, time\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(4)\n",
        str(db), stdout=asyncio.subprocess.PIPE)
    term: Terminal | None = None
    try:
        assert locker.stdout is not None
        assert await asyncio.wait_for(locker.stdout.readline(), 10) == b"locked\n"
        term = Terminal(["run", "-c", str(config)], tmp_path, base_env())
        fds = Path(f"/proc/{term.proc.pid}/fd")
        async with asyncio.timeout(10):  # the bot has the database open: it is starting, signals handled
            while not any(_points_to(fd, db) for fd in fds.iterdir()):
                await asyncio.sleep(0.02)
        term.proc.send_signal(signal.SIGTERM)
        assert await term.exit_code(timeout=10) == 0, term.output
        assert "Traceback" not in term.output
    finally:
        if term is not None:
            term.close()
        if locker.returncode is None:
            locker.kill()
        await locker.wait()


def _points_to(fd: Path, target: Path) -> bool:
    try:
        return Path(os.readlink(fd)) == target
    except OSError:
        return False


def test_run_starts_with_the_collector_off_and_serves_with_it_on(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # start-up's objects live as long as the process: no collector passes over them while it starts,
    # then they are frozen out of its passes, and it runs again for everything that comes after
    import gc

    from bot import app, cli

    seen: dict[str, object] = {}

    class Started:
        channels: dict[str, object] = {}

        def __init__(self, config: object, channels: object) -> None:
            seen["building"] = gc.isenabled()

        async def __aenter__(self) -> Started:
            seen["starting"] = gc.isenabled()
            return self

    async def served(channels: object) -> None:
        seen["serving"], seen["frozen"] = gc.isenabled(), gc.get_freeze_count() > 0

    async def closed(running: object) -> None:
        seen["closed"] = True

    monkeypatch.setattr(app, "App", Started)
    monkeypatch.setattr(cli, "_channels", lambda config, interactive: {})
    monkeypatch.setattr(cli, "_setup_logging", lambda *args, **kwargs: None)
    monkeypatch.setattr(cli, "_first_closed", served)
    monkeypatch.setattr(cli, "_close", closed)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = tmp_path / "config.yaml"
    config.write_text(f"storage: {{path: {tmp_path / 'bot.db'}}}\n")
    try:
        assert cli.main(["run", "-c", str(config)]) == 0
    finally:
        gc.unfreeze()
    assert seen == {"building": False, "starting": False, "serving": True, "frozen": True, "closed": True}
    assert gc.isenabled()
    config.write_text("agent: {nonsense: 1}\n")  # a start that fails leaves it on too
    assert cli.main(["run", "-c", str(config)]) == 2
    assert gc.isenabled()
    config.write_text("")
    assert cli.main(["check", "-c", str(config)]) == 0
    assert gc.isenabled()
