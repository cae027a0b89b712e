"""The fake Discord in a child process, and a stack of it, the fake LLM and ``chatgate run``
with the Discord channel, for the ``discord`` scenario.

    async with discord_stack() as stack:
        bot = await stack.start_bot()                     # returns once it identified and runs
        said_at, reply = await stack.ask("c0", "hello")   # a mention in channel c0, and the answer

Times are ``time.monotonic()`` of the machine, as everywhere in ``bench``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import START_TIMEOUT, BotProcess, FakeLLMProcess, _end, _spawn

JSON = dict[str, Any]
USER = 4242


class FakeDiscordProcess:
    """``python -m tests.fakes.discord_server`` in a child process, with a guild of ``channels``
    text channels (``c0``, ``c1`` ...). What the bot sends is fetched as the fake records it."""

    def __init__(self, channels: int = 20) -> None:
        self.channels_wanted = channels
        self.info: JSON = {}
        self.sent: list[JSON] = []
        self.by_channel: dict[str, list[JSON]] = defaultdict(list)
        self._changed = asyncio.Condition()
        self._proc: asyncio.subprocess.Process | None = None
        self._http: aiohttp.ClientSession | None = None
        self._watcher: asyncio.Task[None] | None = None

    def channel(self, name: str) -> str:
        return str(self.info["channels"][name])

    async def __aenter__(self) -> FakeDiscordProcess:
        self._proc = await _spawn("tests.fakes.discord_server", "--port", "0", "--channels",
                                  str(self.channels_wanted), stdout=asyncio.subprocess.PIPE)
        try:
            assert self._proc.stdout is not None
            line = await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT)
            self.info = json.loads(line)
            root = self.info["api_base"].split("/api/")[0]
            self._http = aiohttp.ClientSession(root, timeout=aiohttp.ClientTimeout(total=None),
                                               connector=aiohttp.TCPConnector(limit=0))
            self._watcher = asyncio.create_task(self._watch(), name="fake discord sent")
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def say(self, channel: str, text: str, *, mention: bool = True, user: int = USER) -> float:
        """A user's message in ``channel`` (by name), mentioning the bot; when it was dispatched."""
        body = {"channel_id": self.channel(channel), "user_id": user, "text": text, "mention": mention}
        return float((await self._call("POST", "/_control/say", json=body))["at"])

    async def drop(self) -> float:
        return float((await self._call("POST", "/_control/drop"))["at"])

    async def state(self) -> JSON:
        return await self._call("GET", "/_control/state")

    async def sent_in(self, channel: str, count: int, timeout: float) -> list[JSON]:
        cid = self.channel(channel)
        await self._wait(lambda: len(self.by_channel[cid]) >= count, timeout)
        return self.by_channel[cid][:count]

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
                    self.sent.append(record)
                    self.by_channel[str(record["channel_id"])].append(record)
                self._changed.notify_all()

    async def _close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.wait({self._watcher})
        if self._http is not None:
            await self._http.close()
        await _end(self._proc)


class DiscordStack:
    def __init__(self, tmp: Path, llm: FakeLLMProcess, dc: FakeDiscordProcess) -> None:
        self.tmp, self.llm, self.dc = tmp, llm, dc
        self.bot: BotProcess | None = None
        self._starts = 0

    def config(self, discord: JSON | None = None) -> Path:
        info = self.dc.info
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "bench-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.tmp / "chatgate.db")},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "channels": {"console": {"enabled": False},
                         "discord": {"enabled": True, "token": info["token"], "api_base": info["api_base"],
                                     "gateway_url": info["gateway_url"], "dm_policy": "open",
                                     "guilds": [info["guild"]], **(discord or {})}},
            "logging": {"level": "WARNING"},
            "limits": {"messages_per_minute": None},  # the bench measures the bot, not the per-person limiter
        }
        self._starts += 1
        path = self.tmp / f"config-{self._starts}.yaml"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start_bot(self, discord: JSON | None = None, timeout: float = 20.0) -> BotProcess:
        """(Re)starts the bot; returns once it has identified and answers a first message."""
        if self.bot is not None:
            await self.bot.stop()
        before = (await self.dc.state())["identifies"]
        self.bot = BotProcess(self.config(discord), self.tmp / "bot.log")
        await self.bot.start()
        deadline = time.monotonic() + timeout
        while (await self.dc.state())["identifies"] <= before:
            if self.bot.exited is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not connect (exit code {self.bot.exited}):\n{self.bot.log_tail()}")
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # start-up recovery runs right after connecting
        return self.bot

    async def ask(self, channel: str, text: str, timeout: float = 10.0) -> tuple[float, JSON]:
        """A mention in ``channel`` and the channel's next sent message: (when said, its record)."""
        count = len(self.dc.by_channel[self.dc.channel(channel)]) + 1
        said_at = await self.dc.say(channel, text)
        return said_at, (await self.dc.sent_in(channel, count, timeout))[-1]


@asynccontextmanager
async def discord_stack(channels: int = 20) -> AsyncIterator[DiscordStack]:
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-discord-") as tmp:
        async with AsyncExitStack() as children:
            llm = await children.enter_async_context(FakeLLMProcess("--control"))
            dc = await children.enter_async_context(FakeDiscordProcess(channels))
            stack = DiscordStack(Path(tmp), llm, dc)

            async def stop_bot() -> None:
                if stack.bot is not None:
                    await stack.bot.stop()

            children.push_async_callback(stop_bot)
            yield stack
