"""The fake Slack in a child process, and ``chatgate run`` against it, for ``bench``.

    async with running_slack_stack("socket") as stack:  # fake LLM + fake Slack, in a temp directory
        await stack.start_bot()                         # returns once the bot is connected
        pushed_at, post = await stack.ask("D1000", "hello")  # a DM in, the bot's chat.postMessage

Socket Mode: messages go in as envelopes over the bot's WebSocket; HTTP: as signed Events
API posts to the bot's endpoint (both sent by the fake, timed with ``time.monotonic()``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import START_TIMEOUT, BotProcess, FakeLLMProcess, _end, _spawn, accepts

JSON = dict[str, Any]
BOT_TOKEN, APP_TOKEN, SIGNING_SECRET = "xoxb-test-token", "xapp-test-token", "test-signing-secret"


class FakeSlackProcess:
    """``python -m tests.fakes.slack_server`` in a child process; what the bot posts is
    fetched as soon as the fake records it into ``posts`` and ``by_chat``."""

    def __init__(self) -> None:
        self.base_url = ""
        self.posts: list[JSON] = []
        self.by_chat: dict[str, list[JSON]] = defaultdict(list)
        self._changed = asyncio.Condition()
        self._proc: asyncio.subprocess.Process | None = None
        self._http: aiohttp.ClientSession | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._ids = 0

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/api/")

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    async def __aenter__(self) -> FakeSlackProcess:
        self._proc = await _spawn("tests.fakes.slack_server", "--port", "0", stdout=asyncio.subprocess.PIPE)
        try:
            assert self._proc.stdout is not None
            self.base_url = (await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT)).decode().strip()
            if not self.base_url.startswith("http://"):
                raise RuntimeError("the fake Slack did not start (see its error above)")
            self._http = aiohttp.ClientSession(self.root, timeout=aiohttp.ClientTimeout(total=None),
                                               connector=aiohttp.TCPConnector(limit=0))
            self._watcher = asyncio.create_task(self._watch(), name="fake slack posts")
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    def dm(self, channel: str, text: str) -> JSON:
        self._ids += 1
        ts = f"{1_800_000_000 + self._ids}.{self._ids % 1_000_000:06d}"
        user = "U" + channel[1:]  # one person per DM (one user's DMs would be one session)
        event = {"type": "message", "channel_type": "im", "user": user, "text": text, "ts": ts, "channel": channel,
                 "team": "T0001", "event_ts": ts}
        return {"type": "event_callback", "team_id": "T0001", "api_app_id": "A0001", "event": event,
                "event_id": f"Ev{self._ids:010d}", "event_time": int(time.time())}

    def command(self, channel: str, name: str, text: str = "") -> JSON:
        self._ids += 1
        return {"team_id": "T0001", "channel_id": channel, "user_id": "U" + channel[1:], "user_name": "someone",
                "command": name, "text": text, "trigger_id": f"{self._ids}.1.bench"}

    async def send(self, payload: JSON, bot_url: str | None) -> float:
        """Into the bot (over the socket, or posted to ``bot_url``); when the fake started sending."""
        if bot_url is None:
            return float((await self._call("POST", "/_control/push", json=payload))["at"])
        return float((await self._call("POST", "/_control/post", params={"url": bot_url}, json=payload))["at"])

    async def state(self) -> JSON:
        return await self._call("GET", "/_control/state")

    async def posted_in(self, channel: str, count: int, timeout: float) -> list[JSON]:
        await self._wait(lambda: len(self.by_chat[channel]) >= count, timeout)
        return self.by_chat[channel][:count]

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        assert self._http is not None
        async with self._http.request(method, path, **kw) as response:
            response.raise_for_status()
            return await response.json()

    async def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(ready)

    async def _watch(self) -> None:
        seen = 0
        while True:
            records = await self._call("GET", "/_control/posts", params={"since": seen, "wait": 30})
            seen += len(records)
            async with self._changed:
                for record in records:
                    if record["method"] == "chat.postMessage":
                        self.posts.append(record)
                        self.by_chat[record["channel"]].append(record)
                self._changed.notify_all()

    async def _close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.wait({self._watcher})
        if self._http is not None:
            await self._http.close()
        await _end(self._proc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SlackStack:
    """The fake LLM, the fake Slack, and the bot in ``mode`` (socket | http) against them."""

    def __init__(self, tmp: Path, llm: FakeLLMProcess, slack: FakeSlackProcess, mode: str) -> None:
        self.tmp, self.llm, self.slack, self.mode = tmp, llm, slack, mode
        self.port = _free_port()
        self.bot: BotProcess | None = None

    @property
    def bot_url(self) -> str | None:
        return None if self.mode == "socket" else f"http://127.0.0.1:{self.port}/slack/events"

    def config(self, runs: JSON | None = None) -> Path:
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "bench-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.tmp / "chatgate.db")},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "channels": {"console": {"enabled": False},
                         "slack": {"enabled": True, "mode": self.mode, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN,
                                   "signing_secret": SIGNING_SECRET, "base_url": self.slack.base_url,
                                   "http": {"listen": "127.0.0.1", "port": self.port, "path": "/slack/events"},
                                   "dm_policy": "open", "group_policy": "open", "streaming": "off"}},
            "runs": runs or {},
            "limits": {"messages_per_minute": None},  # the bench measures the bot, not the per-person limiter
            "logging": {"level": "WARNING"},
        }
        path = self.tmp / f"config-{self.mode}.yaml"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start_bot(self, runs: JSON | None = None, timeout: float = 15.0) -> BotProcess:
        before = await self.slack.state()
        self.bot = BotProcess(self.config(runs), self.tmp / "bot.log")
        await self.bot.start()
        deadline = time.monotonic() + timeout
        while True:
            state = await self.slack.state()
            if self.mode == "socket" and state["sockets"] > before["sockets"]:
                break
            if self.mode == "http" and state["auth_tests"] > before["auth_tests"] and await accepts(self.port):
                break
            if self.bot.exited is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not connect (exit code {self.bot.exited}):\n{self.bot.log_tail()}")
            await asyncio.sleep(0.05)
        return self.bot

    async def stop_bot(self) -> None:
        bot, self.bot = self.bot, None
        if bot is not None:
            await bot.stop()

    async def ask(self, channel: str, text: str, timeout: float = 10.0) -> tuple[float, JSON]:
        count = len(self.slack.by_chat[channel]) + 1
        at = await self.slack.send(self.slack.dm(channel, text), self.bot_url)
        return at, (await self.slack.posted_in(channel, count, timeout))[-1]

    async def command(self, channel: str, name: str, timeout: float = 10.0) -> tuple[float, JSON]:
        count = len(self.slack.by_chat[channel]) + 1
        at = await self.slack.send(self.slack.command(channel, name), self.bot_url)
        return at, (await self.slack.posted_in(channel, count, timeout))[-1]


@asynccontextmanager
async def running_slack_stack(mode: str, *llm_args: str) -> AsyncIterator[SlackStack]:
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-slack-") as tmp:
        async with AsyncExitStack() as children:
            llm = await children.enter_async_context(FakeLLMProcess("--control", *llm_args))
            slack = await children.enter_async_context(FakeSlackProcess())
            stack = SlackStack(Path(tmp), llm, slack, mode)
            children.push_async_callback(stack.stop_bot)
            yield stack
