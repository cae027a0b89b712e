"""Several `chatgate run` processes on one PostgreSQL database, for the cluster tests and bench.

``Instances`` starts N real processes (``python -m bot run``) against the fake Telegram and the
fake LLM of the test process, each with its own webhook port (or polling), all on one database;
``Balancer`` is a round-robin HTTP balancer on loopback in front of their webhooks (a backend
that refuses the connection is skipped, as a balancer's health check would). With a fake Slack
or a fake Discord, the instances serve that platform instead of Telegram.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiohttp import web

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.llm_server import FakeLLM
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "123456:TEST-TOKEN"
SECRET = "cluster-secret"
START_TIMEOUT = 30.0


def free_port() -> int:
    """A free port for a process to listen on later, below Linux's ephemeral range (32768 and
    up): one the kernel hands out (port 0) may meanwhile become some process's outgoing port,
    and the instance started on it then fails to bind."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32000")


class Balancer:
    """Round-robin POST forwarding to the backends' webhooks; ``hits`` counts per backend."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        self.port = free_port()
        self.hits: list[int] = [0] * len(backends)
        self._next = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def aim(self, index: int) -> None:
        """The next request goes to backend ``index`` (then round robin goes on from there)."""
        self._next = index

    async def __aenter__(self) -> Balancer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        for _ in range(len(self.backends)):
            i = self._next % len(self.backends)
            self._next += 1
            try:
                async with self._session.request(request.method, self.backends[i] + request.path_qs, data=body,
                                                 headers=headers) as response:
                    self.hits[i] += 1
                    return web.Response(status=response.status, body=await response.read())
            except aiohttp.ClientConnectionError:
                continue  # that instance is down: the next one
        return web.Response(status=502)


class Instance:
    def __init__(self, tmp: Path, name: str, port: int) -> None:
        self.name, self.port = name, port
        self.log = tmp / f"{name}.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name}\n" + "\n".join(text.splitlines()[-lines:])


class Instances:
    """N `chatgate run` processes sharing the database at ``url`` and a workspace root."""

    def __init__(self, tmp: Path, url: str | None, llm: FakeLLM, tg: FakeTelegram, count: int = 3, *,
                 mode: str = "webhook", lease_seconds: float = 3.0, runs: dict[str, Any] | None = None,
                 tools: dict[str, Any] | None = None, slack: FakeSlack | None = None,
                 discord: FakeDiscord | None = None, discord_keys: dict[str, Any] | None = None,
                 telegram_keys: dict[str, Any] | None = None,
                 extra: Callable[[Instance], dict[str, Any]] | None = None) -> None:
        """``url`` None: one instance on a SQLite file instead (for comparisons). With ``slack``, the
        instances serve Slack (``mode`` http or socket) instead of Telegram; with ``discord``, they
        serve Discord (every DM and guild open; ``discord_keys`` adds or overrides
        ``channels.discord`` keys: ``shard_count``, ``shards``, ``guilds`` ...); ``telegram_keys``
        does the same for ``channels.telegram``; ``extra`` gives an instance's more sections (its
        dashboard)."""
        self.tmp, self.url, self.llm, self.tg, self.mode = tmp, url, llm, tg, mode
        self.lease_seconds = lease_seconds
        self.runs = runs or {}
        self.slack = slack
        self.discord = discord
        self.discord_keys = discord_keys or {}
        self.telegram_keys = telegram_keys or {}
        self.tools = tools or {}
        self.extra = extra or (lambda instance: {})
        self.items = [Instance(tmp, f"i{n + 1}", free_port()) for n in range(count)]
        self.balancer = Balancer([f"http://127.0.0.1:{i.port}" for i in self.items])

    async def __aenter__(self) -> Instances:
        await self.balancer.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for instance in self.items:
            if instance.alive:
                assert instance.proc is not None
                instance.proc.kill()
                await instance.proc.wait()
        await self.balancer.__aexit__()

    def config(self, instance: Instance) -> Path:
        channels: dict[str, Any] = {"console": {"enabled": False}}
        if self.discord is not None:
            d = self.discord
            channels["discord"] = {"enabled": True, "token": d.token, "api_base": d.api_base,
                                   "gateway_url": d.gateway_url, "dm_policy": "open", "guilds": ["*"],
                                   **self.discord_keys}
        elif self.slack is not None:
            s = self.slack
            channels["slack"] = {"enabled": True, "mode": self.mode, "bot_token": s.bot_token,
                                 "app_token": s.app_token, "signing_secret": s.signing_secret, "base_url": s.base_url,
                                 "http": {"listen": "127.0.0.1", "port": instance.port}, "dm_policy": "open",
                                 "streaming": "off"}
        else:
            telegram: dict[str, Any] = {"enabled": True, "token": TOKEN, "base_url": self.tg.api_root,
                                        "dm_policy": "open", "group_policy": "open", "mode": self.mode}
            if self.mode == "webhook":
                telegram["webhook"] = {"listen": "127.0.0.1", "port": instance.port, "path": "/telegram",
                                       "url": f"{self.balancer.url}/telegram", "secret_token": SECRET}
            channels["telegram"] = {**telegram, **self.telegram_keys}
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "test-key", "base_url": self.llm.openai_base_url}},
            "storage": {"url": self.url, "path": str(self.tmp / "chatgate.db")},
            "cluster": {"lease_seconds": self.lease_seconds, "instance": instance.name},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "delivery": {"retry_for": 60},
            "runs": self.runs,
            "tools": self.tools,
            "limits": {"messages_per_minute": None},
            "logging": {"level": "INFO"},
            "channels": channels,
            **self.extra(instance),
        }
        path = self.tmp / f"{instance.name}.yaml"
        path.write_text(json.dumps(config, indent=2))
        return path

    async def start(self, instance: Instance | None = None) -> None:
        """Start one instance (or all, together); returns once each has joined."""
        starting = [instance] if instance is not None else self.items
        for one in starting:
            env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))}
            env["PYTHONPATH"] = os.environ.get("BENCH_BOT_TREE") or str(ROOT)  # the bench may measure another checkout
            with one.log.open("ab") as log:
                one.proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bot", "run", "-c", str(self.config(one)), cwd=self.tmp, env=env,
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
        await asyncio.gather(*(self._joined(one) for one in starting))

    async def _joined(self, instance: Instance) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while "chatgate running" not in (instance.log.read_text(errors="replace") if instance.log.exists() else ""):
            assert instance.proc is not None
            if instance.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"{instance.name} did not start (exit {instance.proc.returncode}):\n"
                                     + instance.tail())
            await asyncio.sleep(0.05)

    async def kill(self, instance: Instance) -> None:
        assert instance.proc is not None
        instance.proc.send_signal(signal.SIGKILL)
        await instance.proc.wait()

    async def terminate(self, instance: Instance) -> int:
        assert instance.proc is not None
        instance.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(instance.proc.wait(), 15)

    def by_name(self, name: str) -> Instance:
        return next(i for i in self.items if i.name == name)

    def tails(self, lines: int = 30) -> str:
        return "\n".join(i.tail(lines) for i in self.items)

    async def query(self, sql: str, *args: Any) -> list[Any]:
        assert self.url is not None, "PostgreSQL only"
        conn = await asyncpg.connect(self.url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def holder(self, lease: str, *, timeout: float = 10.0, not_: Instance | None = None) -> Instance:
        """The instance holding ``lease`` (waits until one does; with ``not_``, another one)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = await self.query("SELECT holder FROM cluster_leases WHERE name = $1"
                                    " AND expires_at >= extract(epoch from clock_timestamp())", lease)
            if rows and (not_ is None or rows[0][0] != not_.name):
                return self.by_name(rows[0][0])
            assert time.monotonic() < deadline, f"nobody holds {lease}\n{self.tails()}"
            await asyncio.sleep(0.05)

    async def post(self, update: dict[str, Any]) -> int:
        """Telegram posting an update to the webhook URL (the balancer); its status."""
        return await self.tg.post_webhook_update(update, timeout=20)


async def wait_until(check: Callable[[], Any], timeout: float, what: str, tails: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s\n{tails()}")
        await asyncio.sleep(0.05)
