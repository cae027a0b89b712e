"""The fake WhatsApp Cloud API in a child process, and ``chatgate run`` against it, for ``bench``.

    async with running_whatsapp_stack() as stack:    # fake LLM + fake Graph API, in a temp directory
        await stack.start_bot()                       # returns once the bot's webhook listens
        pushed_at, sent = await stack.ask(1000, "hello")  # a signed webhook in, the bot's /messages

Messages go in as Meta posts them: a ``messages`` webhook signed with the app secret
(``X-Hub-Signature-256``), sent by the fake over kept-alive connections and timed from the
moment it starts posting; answers are the ``POST <phone number id>/messages`` calls the fake
records (``time``). Chat ``n`` is the person 4915550000000 + n, who wrote just now (inside
the 24-hour window). The records have ``plain`` and ``time`` as the Telegram stack's do.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import START_TIMEOUT, BotProcess, FakeLLMProcess, _end, _merged, _spawn, accepts
from bench.slack_stack import _free_port
from tests.fakes.whatsapp_server import FakeWhatsApp

JSON = dict[str, Any]
_DEFAULTS = FakeWhatsApp()  # the standalone fake's token, secrets and number (nothing started)
FIRST_NUMBER = 4915550000000


def person(chat: int) -> str:
    return str(FIRST_NUMBER + chat)


class FakeWhatsAppProcess:
    """``python -m tests.fakes.whatsapp_server --port 0`` in a child process; what the bot sends
    is fetched as soon as the fake records it (a long poll) into ``sent`` and ``by_person``."""

    def __init__(self) -> None:
        self.base_url = ""
        self.sent: list[JSON] = []
        self.by_person: dict[str, list[JSON]] = defaultdict(list)
        self._changed = asyncio.Condition()
        self._proc: asyncio.subprocess.Process | None = None
        self._http: aiohttp.ClientSession | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeWhatsAppProcess:
        self._proc = await _spawn("tests.fakes.whatsapp_server", "--port", "0", stdout=asyncio.subprocess.PIPE)
        try:
            assert self._proc.stdout is not None
            self.base_url = (await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT)).decode().strip()
            if not self.base_url.startswith("http://"):
                raise RuntimeError("the fake WhatsApp did not start (see its error above)")
            self._http = aiohttp.ClientSession(self.base_url, timeout=aiohttp.ClientTimeout(total=None),
                                               connector=aiohttp.TCPConnector(limit=0))
            self._watcher = asyncio.create_task(self._watch(), name="fake whatsapp sent")
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def post(self, url: str, user: str, text: str) -> float:
        """A signed text webhook from ``user`` to the bot at ``url``; when the fake started posting."""
        answer = await self._call("POST", "/_control/post", params={"url": url}, json={"user": user, "text": text})
        if answer["statuses"] != [200]:
            raise RuntimeError(f"the bot answered the webhook {answer['statuses']}")
        return float(answer["at"])

    async def sent_to(self, user: str, count: int, timeout: float) -> list[JSON]:
        await self._wait(lambda: len(self.by_person[user]) >= count, timeout)
        return self.by_person[user][:count]

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        assert self._http is not None
        async with self._http.request(method, path, **kw) as response:
            response.raise_for_status()
            return await response.json()

    async def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(ready)

    async def _watch(self) -> None:
        while True:
            records = await self._call("GET", "/_control/sent", params={"since": len(self.sent), "wait": 30})
            async with self._changed:
                for record in records:
                    record["plain"] = record["text"]
                    self.sent.append(record)
                    self.by_person[record["to"]].append(record)
                self._changed.notify_all()

    async def _close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.wait({self._watcher})
        if self._http is not None:
            await self._http.close()
        await _end(self._proc)


class WhatsAppStack:
    """The fake LLM, the fake Graph API, and the bot with the WhatsApp channel against them."""

    def __init__(self, tmp: Path, llm: FakeLLMProcess, wa: FakeWhatsAppProcess) -> None:
        self.tmp, self.llm, self.wa = tmp, llm, wa
        self.port = _free_port()
        self.bot: BotProcess | None = None

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/whatsapp"

    def config(self, extra: JSON | None = None) -> Path:
        d = _DEFAULTS
        config: JSON = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "bench-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.tmp / "chatgate.db")},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "channels": {"console": {"enabled": False},
                         "whatsapp": {"enabled": True, "phone_number_id": d.phone_number_id, "access_token": d.token,
                                      "app_secret": d.app_secret, "verify_token": d.verify_token,
                                      "api_version": d.version, "base_url": self.wa.base_url,
                                      "webhook": {"bind": f"127.0.0.1:{self.port}", "path": "/whatsapp"},
                                      "dm_policy": "open"}},
            "limits": {"messages_per_minute": None},  # the bench measures the bot, not the per-person limiter
            "logging": {"level": "WARNING"},
        }
        if extra:
            config = _merged(config, extra)
        if more := os.environ.get("BENCH_CONFIG"):  # as bench.common's Stack: JSON laid over the config
            config = _merged(config, json.loads(more))
        path = self.tmp / "config-whatsapp.yaml"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start_bot(self, extra: JSON | None = None, timeout: float = 15.0) -> BotProcess:
        """Starts the bot; returns once its webhook accepts connections."""
        await self.stop_bot()
        self.bot = BotProcess(self.config(extra), self.tmp / "bot.log")
        await self.bot.start()
        deadline = time.monotonic() + timeout
        while not await accepts(self.port):
            if self.bot.exited is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not listen (exit code {self.bot.exited}):\n{self.bot.log_tail()}")
            await asyncio.sleep(0.05)
        return self.bot

    async def stop_bot(self) -> None:
        bot, self.bot = self.bot, None
        if bot is not None:
            await bot.stop()

    async def ask(self, chat: int, text: str, timeout: float = 10.0) -> tuple[float, JSON]:
        """A DM from person ``chat`` and the next message sent to them: (when posted, its record)."""
        user = person(chat)
        count = len(self.wa.by_person[user]) + 1
        at = await self.wa.post(self.webhook_url, user, text)
        return at, (await self.wa.sent_to(user, count, timeout))[-1]


@asynccontextmanager
async def running_whatsapp_stack(*llm_args: str) -> AsyncIterator[WhatsAppStack]:
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-whatsapp-") as tmp:
        async with AsyncExitStack() as children:
            llm = await children.enter_async_context(FakeLLMProcess("--control", *llm_args))
            wa = await children.enter_async_context(FakeWhatsAppProcess())
            stack = WhatsAppStack(Path(tmp), llm, wa)
            children.push_async_callback(stack.stop_bot)
            yield stack
