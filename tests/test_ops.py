"""The ops capability against a real `chatgate run`: a real Prometheus (Debian's ``prometheus``)
scrapes its ``/metrics`` and its query API returns the counters after traffic through the
fake Telegram; ``/readyz`` goes 503 while the fake Telegram does not answer and 200 once it
is back; ``/healthz`` and ``/startupz``; ``ops.token`` guards ``/metrics``."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.test_durability import TOKEN, Bot

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PERSON, STRANGER = 42, 7
SAID = "what is the weather in Lisbon"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def ops_bot(tmp_path: Path) -> AsyncIterator[tuple[Bot, str]]:
    port = free_port()
    async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg:
        bot = Bot(tmp_path, llm, tg)
        bot.configure(telegram={"allow_from": [PERSON]}, ops={"enabled": True, "bind": f"127.0.0.1:{port}"})
        try:
            yield bot, f"http://127.0.0.1:{port}"
        finally:
            await bot.close()


async def get(url: str, **headers: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers,
                                                         timeout=aiohttp.ClientTimeout(total=5)) as response:
        return response.status, await response.text()


async def until(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.2)


async def traffic(bot: Bot) -> None:
    tg = bot.tg
    tg.push(tg.message(PERSON, SAID, user_id=PERSON))
    await tg.wait_for(lambda: [s for s in tg.sent if s.chat_id == PERSON], timeout=20)
    tg.push(tg.message(PERSON, "and tomorrow?", user_id=PERSON))
    tg.push(tg.message(STRANGER, "let me in", user_id=STRANGER))  # refused: not on the allowlist
    await tg.wait_for(lambda: len([s for s in tg.sent if s.chat_id == PERSON]) >= 2
                      and [s for s in tg.sent if s.chat_id == STRANGER], timeout=20)


class Prometheus:
    def __init__(self, tmp: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (tmp / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "chatgate", "static_configs": [{"targets": [target]}]}],
        }))
        self.args = [f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{self.port}"]
        self.log = tmp / "prometheus.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Prometheus:
        with self.log.open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(PROMETHEUS, *self.args, stdout=log, stderr=log,
                                                             stdin=asyncio.subprocess.DEVNULL)

        async def ready() -> bool:
            try:
                return (await get(f"{self.url}/-/ready"))[0] == 200
            except aiohttp.ClientError:
                return False

        await until(ready, f"prometheus ready ({self.log.read_text()[-500:]})", 20)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    async def value(self, query: str) -> float | None:
        async with aiohttp.ClientSession() as http, http.get(f"{self.url}/api/v1/query", params={"query": query},
                                                             timeout=aiohttp.ClientTimeout(total=5)) as response:
            body = await response.json()
        assert body["status"] == "success", body
        result = body["data"]["result"]
        return float(result[0]["value"][1]) if result else None


async def test_prometheus_scrapes_the_counters_of_a_running_bot(ops_bot: tuple[Bot, str], tmp_path: Path) -> None:
    bot, ops = ops_bot
    await bot.start()
    await traffic(bot)
    async with Prometheus(tmp_path, ops.removeprefix("http://")) as prometheus:
        async def scraped() -> bool:
            return await prometheus.value('sum(chatgate_messages_received_total{platform="telegram"})') == 3
        await until(scraped, f"3 messages in Prometheus; bot log:\n{bot.tail()}")
        assert await prometheus.value('chatgate_runs_total{outcome="completed"}') == 2
        assert await prometheus.value('chatgate_messages_refused_total{platform="telegram",reason="access"}') == 1
        assert await prometheus.value('chatgate_answers_sent_total{platform="telegram"}') == 3  # 2 answers, 1 notice
        assert await prometheus.value('chatgate_deliveries_owed_total{platform="telegram"}') == 3
        async def model_calls() -> bool:  # the two runs' and the session's title (made in the background)
            return await prometheus.value('sum(chatgate_model_calls_total{outcome="ok"})') == 3
        await until(model_calls, "3 model calls in Prometheus")
        assert (await prometheus.value('sum(chatgate_model_tokens_total{kind="input"})') or 0) > 0
        assert await prometheus.value('chatgate_run_duration_seconds_count{outcome="completed"}') == 2
        assert await prometheus.value("chatgate_run_first_token_seconds_count") == 2
        assert await prometheus.value('chatgate_channel_up{platform="telegram"}') == 1
        assert await prometheus.value("chatgate_runs_active") == 0
        assert await prometheus.value('up{job="chatgate"}') == 1
    status, text = await get(f"{ops}/metrics")
    assert status == 200
    labels = {v for family in text_string_to_metric_families(text) for s in family.samples for v in s.labels.values()}
    assert not labels & {str(PERSON), str(STRANGER)}, labels  # no person in any label
    assert "Lisbon" not in text and "tomorrow" not in text


async def test_readyz_follows_telegram_and_the_start(ops_bot: tuple[Bot, str]) -> None:
    bot, ops = ops_bot
    await bot.start()

    async def ready() -> bool:
        return (await get(f"{ops}/readyz"))[0] == 200

    await until(ready, "ready after the start")
    status, body = await get(f"{ops}/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, body = await get(f"{ops}/startupz")
    assert (status, json.loads(body)) == (200, {"status": "started"})
    bot.tg.fail_for("getUpdates", 4.0)  # Telegram answers 502 Bad Gateway for 4 s, from the next poll on
    bot.tg.push(bot.tg.message(PERSON, "hello", user_id=PERSON))  # ends the poll being held

    async def not_ready() -> dict[str, Any] | None:
        status, body = await get(f"{ops}/readyz")
        return json.loads(body) if status == 503 else None

    found = await until(not_ready, "503 while Telegram does not answer", 20)
    assert found["status"] == "not ready"
    assert [line for line in found["not_ready"] if line.startswith("telegram: polling failed")], found
    assert TOKEN not in json.dumps(found)
    status, text = await get(f"{ops}/metrics")
    assert 'chatgate_channel_up{platform="telegram"} 0.0' in text
    await until(ready, "ready again once Telegram answers", 30)
    assert await bot.terminate() == 0


async def test_a_token_guards_the_metrics_only(tmp_path: Path) -> None:
    port = free_port()
    async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg:
        bot = Bot(tmp_path, llm, tg)
        bot.configure(ops={"enabled": True, "bind": f"127.0.0.1:{port}", "token": "scrape-secret-1234"})
        try:
            await bot.start()
            ops = f"http://127.0.0.1:{port}"
            assert (await get(f"{ops}/metrics"))[0] == 401
            assert (await get(f"{ops}/metrics", Authorization="Bearer wrong"))[0] == 401
            status, text = await get(f"{ops}/metrics", Authorization="Bearer scrape-secret-1234")
            assert status == 200 and "chatgate_messages_received_total" in text
            assert (await get(f"{ops}/healthz"))[0] == 200
        finally:
            await bot.close()
