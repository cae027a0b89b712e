"""`chatgate run` as a real process with the WhatsApp channel, against the fake Cloud API and the
fake LLM in this test process: the CLI finds WhatsApp through the registry and answers a DM,
stops with one line on a refused token, a message stored (answered 200) just before a
SIGKILL is answered once after the restart, and a ``failed`` status that comes after a SIGKILL
finds its answer in the delivery ledger: owed again once, not again at the next start."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.whatsapp_server import FakeWhatsApp

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bot:
    def __init__(self, tmp: Path, llm: FakeLLM, wa: FakeWhatsApp) -> None:
        self.tmp, self.llm, self.wa = tmp, llm, wa
        self.log = tmp / "bot.log"
        self.port = _free_port()
        self.proc: asyncio.subprocess.Process | None = None
        wa.webhook_url = f"http://127.0.0.1:{self.port}/whatsapp"

    def config(self, **whatsapp: Any) -> Path:
        w = self.wa
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "test-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.tmp / "chatgate.db")},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "logging": {"level": "INFO"},
            "channels": {"console": {"enabled": False},
                         "whatsapp": {"enabled": True, "phone_number_id": w.phone_number_id,
                                      "access_token": w.token, "app_secret": w.app_secret,
                                      "verify_token": w.verify_token, "base_url": w.base_url,
                                      "webhook": {"bind": f"127.0.0.1:{self.port}"}, "dm_policy": "open",
                                      **whatsapp}},
        }
        path = self.tmp / "config.yaml"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start(self, *, wait: bool = True, **whatsapp: Any) -> None:
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN", "_SECRET"))}
        env["PYTHONPATH"] = str(ROOT)
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "run", "-c", str(self.config(**whatsapp)), cwd=self.tmp, env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log if wait else asyncio.subprocess.PIPE)
        if not wait:
            return
        deadline = time.monotonic() + START_TIMEOUT
        while not await self._listening():
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"the bot did not start (exit {self.proc.returncode}):\n{self.tail()}")
            await asyncio.sleep(0.05)

    async def _listening(self) -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        writer.close()
        return True

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

    def recorded(self, message_id: str) -> bool:
        """Whether the delivery ledger recorded a chunk as sent with ``message_id``."""
        with sqlite3.connect(f"file:{self.tmp / 'chatgate.db'}?mode=ro", uri=True) as db:
            return bool(list(db.execute("SELECT 1 FROM chunks WHERE message_id = ?", (message_id,))))

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with FakeLLM() as llm, FakeWhatsApp() as wa:
        b = Bot(tmp_path, llm, wa)
        try:
            yield b
        finally:
            await b.close()


async def test_chatgate_run_answers_a_dm(bot: Bot) -> None:
    await bot.start()
    assert await bot.wa.handshake(bot.wa.verify_token, "777") == (200, "777")
    assert await bot.wa.post(bot.wa.text("hello from WhatsApp")) == 200
    (answer,) = await bot.wa.wait_for_sent(1, timeout=10)
    assert answer.text == "echo: hello from WhatsApp"
    await bot.close()
    assert bot.proc is not None and bot.proc.returncode == 0


async def test_a_refused_token_stops_with_one_line(bot: Bot) -> None:
    await bot.start(wait=False, access_token="EAAG-wrong")
    assert bot.proc is not None and bot.proc.stderr is not None
    code = await asyncio.wait_for(bot.proc.wait(), START_TIMEOUT)
    lines = (await bot.proc.stderr.read()).decode().strip().splitlines()
    assert code == 1 and lines[-1].startswith("chatgate: channels.whatsapp.access_token: Meta refused the token")
    assert "EAAG-wrong" not in "\n".join(lines)


async def test_stored_then_killed_is_answered_once_after_restart(bot: Bot) -> None:
    bot.llm.script(Reply.hang())
    await bot.start()
    assert await bot.wa.post(bot.wa.text("survive this")) == 200  # stored
    await bot.llm.wait_for_requests(1, timeout=10)
    await bot.kill()  # asked, not answered
    assert not bot.wa.sent
    await bot.start()
    (answer,) = await bot.wa.wait_for_sent(1, timeout=15)
    assert answer.text == "echo: survive this"
    await asyncio.sleep(1.0)
    assert len(bot.wa.sent) == 1


async def test_a_failed_status_after_a_kill_is_owed_again_once(bot: Bot) -> None:
    await bot.start()
    assert await bot.wa.post(bot.wa.text("hi")) == 200
    (answer,) = await bot.wa.wait_for_sent(1, timeout=10)
    async with asyncio.timeout(10):  # recorded as sent (a kill before that sends it again at the start)
        while not bot.recorded(answer.id):
            await asyncio.sleep(0.05)
    await bot.kill()
    await bot.start()  # nothing of the send in this process: the ledger has it
    failed = bot.wa.failed(answer.id, answer.to, 131000, "Something went wrong")
    assert await bot.wa.post(failed) == 200  # answered once the chunk is owed again
    await bot.wa.wait_for_sent(2, timeout=10)
    assert await bot.wa.post(failed) == 200  # Meta posts it again: the same chunk
    await bot.close()
    await bot.start()  # delivered: nothing resumed
    await asyncio.sleep(1.0)
    assert [s.text for s in bot.wa.sent] == ["echo: hi", "echo: hi"]
    assert "was not delivered after all (whatsapp 131000 Something went wrong" in bot.tail(200)
