"""A test bed for the operator dashboard: the real App (``dashboard.enabled``) with recording
channels and the fake LLM, users with cheap scrypt hashes, an HTTP client that logs in, and
where the browser tests put their screenshots.

    async with Bed(tmp_path, llm) as bed:          # App running, dashboard at bed.url
        http = await bed.client("olive")            # logged in: http.csrf, http.post(...)
"""

from __future__ import annotations

import os
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import aiohttp

from bot.app import App
from bot.runs import ActiveRun
from bot.settings import Config, load_config
from bot.web import passwords
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import FakeLLM, Reply

PASSWORDS = {"olive": "olive-operator-pw", "vera": "vera-viewer-pw"}
ROLES = {"olive": "operator", "vera": "viewer"}
CHROMIUM = Path(os.environ.get("CHATGATE_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(os.environ.get("CHATGATE_SCREENSHOTS") or Path(tempfile.gettempdir()) / "chatgate-dashboard-shots")
taken: list[Path] = []  # screenshots saved in this test session (tests/conftest.py prints where)


@cache
def cheap_hash(password: str) -> str:
    """A real scrypt hash with the weakest parameters a config accepts: fast enough for tests."""
    return passwords.hash_password(password, n=passwords.MIN_N)


def users_yaml() -> str:
    return "\n".join(f'    {name}: {{role: {ROLES[name]}, password_hash: "{cheap_hash(pw)}"}}'
                     for name, pw in PASSWORDS.items())


def bed_config(tmp: Path, llm: FakeLLM, *, dashboard: str = "", users: str | None = None, extra: str = "") -> Config:
    """``dashboard``: more keys of the dashboard section (indented two spaces); ``users``: its
    users' lines instead of olive (operator) and vera (viewer); ``extra``: more sections."""
    path = tmp / "config.yaml"
    path.write_text(f"""
agent: {{model: fake-model}}
pricing: {{fake-model: {{input: 3.0, output: 15.0}}}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}", max_retries: 0}}}}
storage: {{path: "{tmp / 'data' / 'chatgate.db'}"}}
workspace: {{root: "{tmp / 'workspaces'}"}}
channels:
  telegram: {{dm_policy: open, group_policy: open, owners: ["1"]}}
  discord: {{dm_policy: pairing}}
limits: {{messages_per_minute: null, daily_tokens: 5000, daily_cost_usd: 0.5}}
dashboard:
  enabled: true
  bind: 127.0.0.1:0
{dashboard}
  users:
{users_yaml() if users is None else users}
{extra}
""")
    return load_config(path, env={})


class Bed:
    """The App with its dashboard, a ``telegram`` and a ``discord`` recording channel."""

    def __init__(self, tmp: Path, llm: FakeLLM, *, dashboard: str = "", users: str | None = None,
                 extra: str = "") -> None:
        self.tmp, self.llm = tmp, llm
        self.config = bed_config(tmp, llm, dashboard=dashboard, users=users, extra=extra)
        self.telegram = RecordingChannel("telegram")
        self.discord = RecordingChannel("discord")
        self.app: App | None = None
        self._clients: list[aiohttp.ClientSession] = []

    async def __aenter__(self) -> Bed:
        app = App(self.config, {"telegram": self.telegram, "discord": self.discord})
        self.telegram.watch(app.events)
        await app.__aenter__()
        self.app = app
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self._clients:
            await client.close()
        if self.app is not None:
            await self.app.__aexit__(None, None, None)

    async def hanging_run(self) -> ActiveRun:
        """A DM whose run waits for the model until it is stopped: the one run in flight."""
        assert self.app is not None
        self.llm.script(Reply.hang())
        await self.telegram.inject(dm("keep going", "42", platform="telegram"))
        await self.llm.wait_for_requests(1)
        (run,) = self.app.turns.dispatcher.registry.runs()
        return run

    @property
    def url(self) -> str:
        assert self.app is not None and self.app.capabilities.get("dashboard") is not None
        return self.app.capabilities["dashboard"].url.rstrip("/")

    @property
    def origin(self) -> str:
        return self.url

    async def client(self, user: str | None = None) -> Client:
        """An HTTP client (cookies kept); logged in as ``user`` when given."""
        session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                        timeout=aiohttp.ClientTimeout(total=10))
        self._clients.append(session)
        client = Client(session, self.url)
        if user is not None:
            response = await client.login(user, PASSWORDS[user])
            assert response.status == 303, await response.text()
            await client.refresh_csrf()
        return client


class Client:
    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url
        self.csrf = ""

    async def login(self, user: str, password: str, origin: str | None = None) -> aiohttp.ClientResponse:
        return await self.session.post(f"{self.url}/login", data={"user": user, "password": password},
                                       headers={"Origin": origin or self.url}, allow_redirects=False)

    async def refresh_csrf(self) -> None:
        page = await (await self.session.get(f"{self.url}/live")).text()
        found = re.search(r'<meta name="csrf-token" content="([^"]+)"', page)
        assert found is not None, page
        self.csrf = found.group(1)

    async def get(self, path: str, **kw: Any) -> aiohttp.ClientResponse:
        return await self.session.get(f"{self.url}{path}", allow_redirects=False, **kw)

    async def post(self, path: str, data: dict[str, str], *, origin: str | None = "", csrf: bool = True,
                   headers: dict[str, str] | None = None) -> aiohttp.ClientResponse:
        """POST a form; ``origin`` None sends no Origin header, "" the dashboard's own."""
        sent = dict(headers or {})
        if origin is not None:
            sent["Origin"] = origin or self.url
        form = {**data, **({"csrf": self.csrf} if csrf else {})}
        return await self.session.post(f"{self.url}{path}", data=form, headers=sent, allow_redirects=False)
