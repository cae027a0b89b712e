"""MCP servers in the running app: start-up, /stop, /mcp and /status through a channel; the
`chatgate mcp` and `chatgate check` listings."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.cli import main
from bot.settings import Config, load_config
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.mcp_servers.harness import DEMO, free_port, wait_for


def write_config(tmp_path: Path, llm: FakeLLM | None, servers: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    base = llm.openai_base_url if llm else "http://127.0.0.1:9/v1"
    path.write_text(json.dumps({
        "agent": {"provider": "openai", "model": "fake-model"},
        "providers": {"openai": {"api_key": "test-key", "base_url": base, "max_retries": 0, "timeout": 10}},
        "storage": {"path": str(tmp_path / "data" / "chatgate.db")},
        "workspace": {"root": str(tmp_path / "workspaces")},
        "mcp": {"servers": servers},
    }))
    return path


def demo(**settings: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [DEMO], "grant": "everyone", **settings}


DOWN = {"url": "http://127.0.0.1:{port}/mcp", "allow_private": True}  # nothing listens there
HANGS = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"], "connect_timeout": 30}


def load(path: Path) -> Config:
    return load_config(path, env={})


async def test_start_up_is_not_delayed_by_servers_that_are_down_or_hang(llm: FakeLLM, tmp_path: Path) -> None:
    servers = {"down": {**DOWN, "url": DOWN["url"].format(port=free_port())}, "hangs": HANGS,
               "missing": {"command": str(tmp_path / "no-such-server")}, "demo": demo()}
    channel = RecordingChannel()
    started = time.monotonic()
    async with App(load(write_config(tmp_path, llm, servers)), {"test": channel}) as app:
        assert time.monotonic() - started < 2.0
        await channel.inject(dm("hello"))
        await channel.wait_for_replies(1)
        assert channel.texts() == ["echo: hello"]  # a run without the servers' tools is not held up
        hub = app.capabilities.get("mcp")
        assert hub is not None
        await wait_for(lambda: hub.state("demo").usable)
        assert hub.state("hangs").value == "connecting" and hub.state("missing").value == "down"
    assert time.monotonic() - started < 15


async def test_stop_cancels_the_call_on_the_server_and_mcp_and_status_show_the_servers(llm: FakeLLM,
                                                                                      tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    servers = {"demo": demo(env={"MARKS": str(marks)}), "down": {**DOWN, "url": DOWN["url"].format(port=free_port())}}
    channel = RecordingChannel()
    channel_app = App(load(write_config(tmp_path, llm, servers)), {"test": channel})
    channel.watch(channel_app.events)
    async with channel_app as app:
        hub = app.capabilities.get("mcp")
        assert hub is not None
        await wait_for(lambda: hub.state("demo").usable)
        llm.script(Reply.tool_calls([Call("mcp__demo__slow", {"seconds": 30}, id="c1")]))
        await channel.inject(dm("take your time"))
        await wait_for(lambda: marks.exists() and "started" in marks.read_text())
        stopped = time.monotonic()
        await channel.inject(dm("/stop"))
        await channel.wait_for_replies(1)
        assert channel.texts() == ["Stopped."]
        await wait_for(lambda: "cancelled" in marks.read_text(), timeout=2)
        assert time.monotonic() - stopped < 2
        await channel.inject(dm("/mcp"))
        await channel.wait_for_replies(2)
        report = channel.texts()[1]
        assert "demo: ready" in report and "down: down" in report and "last error:" in report
        await channel.inject(dm("/status"))
        await channel.wait_for_replies(3)
        assert "MCP servers: demo (ready, 14 tools), down (down, 0 tools)" in channel.texts()[2]


def test_chatgate_mcp_lists_servers_state_tools_and_the_last_error(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, None, {"demo": demo(), "missing": {"command": str(tmp_path / "nope")}})
    assert main(["mcp", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "- demo: ready" in out and "14 tools (stdio; granted to everyone)" in out
    assert "- missing: down" in out and "last error: command not found" in out


def test_chatgate_check_names_a_bad_key_and_lists_the_servers(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, None, {"demo": demo(env={"NODE_OPTIONS": "--require evil.js"})})
    assert main(["check", "-c", str(path)]) == 2
    assert "mcp.servers.demo.env.NODE_OPTIONS: a loader or interpreter variable" in capsys.readouterr().err
    path = write_config(tmp_path, None, {"demo": demo(env={"API_TOKEN": "tok-0123456789"})})
    assert main(["check", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mcp        demo: stdio" in out and "env API_TOKEN" in out and "tok-0123456789" not in out
    assert "- demo: ready" in out


async def test_without_mcp_nothing_is_started_or_imported(llm: FakeLLM, tmp_path: Path) -> None:
    path = write_config(tmp_path, llm, {})
    channel = RecordingChannel()
    async with App(load(path), {"test": channel}) as app:
        assert app.capabilities.get("mcp") is None
        await channel.inject(dm("/mcp"))
        await channel.wait_for_replies(1)
        assert channel.texts() == ["No MCP servers are configured."]
    code = ("import sys; from bot.settings import load_config; import bot.app; "
            f"load_config({str(path)!r}, env={{}}); print('mcp' in sys.modules, 'bot.mcp.hub' in sys.modules)")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE,
                                                cwd=Path(__file__).resolve().parent.parent)
    out, _ = await proc.communicate()
    assert out.decode().split() == ["False", "False"]
