"""``logging.format: json``: one JSON object per line, with time, level, logger and message, the
run and session while a run is computed, the instance; secrets scrubbed as in the text."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.cli import _setup_logging
from bot.logs import about_run
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.test_durability import TOKEN, Bot

PERSON = 42
BOT_TOKEN = "123456789:AAH4bcdefghijklmnopqrstuvwxyz0123"  # a real token's shape, not configured
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def lines_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_record_is_one_scrubbed_json_line(tmp_path: Path) -> None:
    path = tmp_path / "data" / "chatgate.log"
    root, level = logging.getLogger(), logging.getLogger().level
    handler = _setup_logging("DEBUG", path, secrets=("hunter2-secret",), format="json", instance="bot-a")
    try:
        log = logging.getLogger("some.library")
        log.info("connected with %s to %s", "hunter2-secret", f"https://x/bot{BOT_TOKEN}/getMe")
        with about_run("run-1", "main:telegram:dm:7"):
            try:
                raise ValueError("line one\nline two hunter2-secret")
            except ValueError:
                log.exception("it broke")
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)
    plain, broke = lines_of(path)
    assert set(plain) == {"time", "level", "logger", "message", "instance"}
    assert ISO_UTC.match(str(plain["time"])) and plain["level"] == "INFO" and plain["logger"] == "some.library"
    assert plain["message"] == "connected with *** to https://x/bot***/getMe" and plain["instance"] == "bot-a"
    assert (broke["run"], broke["session"], broke["level"]) == ("run-1", "main:telegram:dm:7", "ERROR")
    assert "line two ***" in str(broke["exception"]) and "hunter2" not in path.read_text()
    assert len(path.read_text().splitlines()) == 2  # the traceback's newlines are escaped


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg:
        b = Bot(tmp_path, llm, tg)
        b.configure(telegram={"allow_from": [PERSON]}, logging={"level": "INFO", "format": "json"},
                    cluster={"instance": "bot-one"})
        try:
            yield b
        finally:
            await b.close()


async def test_chatgate_run_writes_json_lines_naming_the_run(bot: Bot) -> None:
    await bot.start()
    bot.llm.script(Reply.error(400, message="bad request from the fake"))  # logged inside the run
    bot.tg.push(bot.tg.message(PERSON, "hello", user_id=PERSON))
    await bot.tg.wait_for(lambda: [s for s in bot.tg.sent if s.chat_id == PERSON], timeout=20)
    assert await bot.terminate() == 0
    records = lines_of(bot.log)  # every line is JSON: a line that is not fails here
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert all(r["instance"] == "bot-one" for r in records)
    [failed] = [r for r in records if str(r["message"]).startswith("run failed")]
    assert failed["level"] == "WARNING" and failed["logger"] == "bot.agent.loop"
    assert str(failed["session"]).endswith(str(PERSON)) and failed["run"]
    assert TOKEN not in bot.log.read_text() and "test-key" not in bot.log.read_text()
