"""`chatgate run` as a real process with the Slack channel, against the fake Slack and the
fake LLM in this test process: the CLI finds Slack through the registry, answers in both
modes, stops with one line on a refused token, and a message acknowledged just before a
SIGKILL is answered once after the restart."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bot:
    def __init__(self, tmp: Path, llm: FakeLLM, slack: FakeSlack) -> None:
        self.tmp, self.llm, self.slack = tmp, llm, slack
        self.log = tmp / "bot.log"
        self.port = _free_port()
        self.proc: asyncio.subprocess.Process | None = None

    def config(self, mode: str, **slack: Any) -> Path:
        s = self.slack
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "test-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.tmp / "chatgate.db")},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "logging": {"level": "INFO"},
            "channels": {"console": {"enabled": False},
                         "slack": {"enabled": True, "mode": mode, "bot_token": s.bot_token, "app_token": s.app_token,
                                   "signing_secret": s.signing_secret, "base_url": s.base_url,
                                   "http": {"listen": "127.0.0.1", "port": self.port},
                                   "dm_policy": "open", "streaming": "off", **slack}},
        }
        path = self.tmp / "config.yaml"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start(self, mode: str = "socket", *, wait: bool = True, **slack: Any) -> None:
        """Start the process; with ``wait``, return once it is connected (its stderr goes to the
        log), else at once with its stderr readable (a process that is expected to stop)."""
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))}
        env["PYTHONPATH"] = str(ROOT)
        sockets = len(self.slack.sockets)
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "run", "-c", str(self.config(mode, **slack)), cwd=self.tmp, env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log if wait else asyncio.subprocess.PIPE)
        if not wait:
            return
        deadline = time.monotonic() + START_TIMEOUT
        while not (len(self.slack.sockets) > sockets if mode == "socket" else await self._listening()):
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"the bot did not connect (exit {self.proc.returncode}):\n{self.tail()}")
            await asyncio.sleep(0.05)

    async def _listening(self) -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        writer.close()
        return True

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with FakeLLM() as llm, FakeSlack() as slack:
        b = Bot(tmp_path, llm, slack)
        try:
            yield b
        finally:
            await b.close()


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_chatgate_run_answers_a_dm(bot: Bot, mode: str) -> None:
    await bot.start(mode)
    body = bot.slack.event(bot.slack.message("D1", "hello from Slack"))
    if mode == "socket":
        await bot.slack.wait_for_ack(await bot.slack.push(body))
    else:
        assert (await bot.slack.post_event(bot.url(), body))[0] == 200
    [post] = await bot.slack.wait_for_posts(1, timeout=10)
    assert (post.channel, post.text) == ("D1", "echo: hello from Slack")
    await bot.close()
    assert bot.proc is not None and bot.proc.returncode == 0


async def test_a_refused_token_stops_with_one_line(bot: Bot) -> None:
    await bot.start("socket", wait=False, bot_token="xoxb-wrong")
    assert bot.proc is not None and bot.proc.stderr is not None
    code = await asyncio.wait_for(bot.proc.wait(), START_TIMEOUT)
    lines = (await bot.proc.stderr.read()).decode().strip().splitlines()
    assert code == 1 and lines[-1].startswith("chatgate: channels.slack.bot_token: Slack refused the token "
                                              "(invalid_auth")
    assert "xoxb-wrong" not in "\n".join(lines)


async def test_acked_then_killed_is_answered_once_after_restart(bot: Bot) -> None:
    bot.llm.script(Reply.hang())
    await bot.start("socket")
    await bot.slack.wait_for_ack(await bot.slack.push(bot.slack.event(bot.slack.message("D1", "survive this"))))
    await bot.llm.wait_for_requests(1, timeout=10)
    await bot.kill()  # acked (stored), asked, not answered
    assert not bot.slack.posts
    await bot.start("socket")
    [post] = await bot.slack.wait_for_posts(1, timeout=15)
    assert post.text == "echo: survive this"
    await asyncio.sleep(1.0)
    assert len([p for p in bot.slack.posts if p.method == "chat.postMessage"]) == 1


async def test_a_token_revoked_while_running_stops_the_process_with_one_line(bot: Bot) -> None:
    await bot.start("socket")
    bot.slack.bot_token = "xoxb-revoked"
    await bot.slack.wait_for_ack(await bot.slack.push(bot.slack.event(bot.slack.message("D1", "hello?"))))
    assert bot.proc is not None
    code = await asyncio.wait_for(bot.proc.wait(), 20)
    assert code == 1
    assert "chatgate: channels.slack.bot_token: Slack refused the token (invalid_auth" in bot.tail()
