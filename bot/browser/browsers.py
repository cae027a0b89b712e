"""The browsers of every session: at most ``max_sessions`` at once, each closed when idle.

Playwright's driver (a Node process) starts with the first browser, not with the bot: a bot
with the browser on but unused runs nothing more. A session's browser starts on its first
action in its own sandbox (``bot.browser.jail``) with its own context, so no two sessions,
and no two people, ever share cookies or storage. When ``max_sessions`` run, the one unused
longest (and not acting now) is closed for a new one; if every one is acting, the new one is
refused. A sweep closes browsers idle for ``idle_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from aiohttp.abc import AbstractResolver

from bot.browser.config import BrowserSettings
from bot.browser.fence import AddressCheck, FenceProxy
from bot.browser.jail import launch
from bot.browser.session import DOWNLOADS, BrowserSession, read_profile
from bot.tools.base import ToolError
from bot.tools.netguard import address_refusal
from bot.workspace import open_folder_inside

log = logging.getLogger(__name__)

SWEEP_EVERY = 30.0  # seconds, at most, between two looks for idle browsers
VIEWPORT = {"width": 1280, "height": 900}


class Browsers:
    def __init__(self, settings: BrowserSettings, *, check: AddressCheck | None = None,
                 resolver: AbstractResolver | None = None) -> None:
        self.settings = settings
        self._check: AddressCheck | None = None if settings.allow_private else (check or address_refusal)
        self._resolver = resolver
        self._sessions: dict[str, BrowserSession] = {}
        self._starting: dict[str, asyncio.Future[BrowserSession]] = {}
        self._playwright: Any | None = None
        self._driver: Any | None = None
        self._driver_lock = asyncio.Lock()
        self._sweeper: asyncio.Task[None] | None = None
        self.launched = 0  # browsers started, for /status and tests

    @property
    def open_sessions(self) -> tuple[str, ...]:
        return tuple(self._sessions)

    def get(self, key: str) -> BrowserSession | None:
        return self._sessions.get(key)

    async def session(self, key: str, workspace: Path, *, person_profile: bool) -> BrowserSession:
        """The session's browser, started if it has none (``ToolError`` when none may start)."""
        found = self._sessions.get(key)
        if found is not None:
            found.used = time.monotonic()
            return found
        starting = self._starting.get(key)
        if starting is None:
            starting = asyncio.ensure_future(self._start(key, workspace, person_profile))
            self._starting[key] = starting
            starting.add_done_callback(lambda _: self._starting.pop(key, None))
        return await asyncio.shield(starting)

    async def _start(self, key: str, workspace: Path, person_profile: bool) -> BrowserSession:
        await self._make_room()
        playwright = await self._driver_started()
        keep = person_profile and self.settings.profile == "per-person"
        fd, _ = await asyncio.to_thread(open_folder_inside, workspace, DOWNLOADS, create=True)
        try:
            downloads = Path(os.path.realpath(f"/proc/self/fd/{fd}"))
            fence = FenceProxy(self._check, self._resolver, label=key)
            browser, jail = await launch(playwright, self.settings, fd, downloads, fence)
        finally:
            os.close(fd)
        try:
            state = await asyncio.to_thread(read_profile, workspace) if keep else None
            context = await browser.new_context(storage_state=state, viewport=VIEWPORT, accept_downloads=True,
                                                service_workers="block")
            context.set_default_timeout(self.settings.action_timeout * 1000)
        except BaseException:
            with contextlib.suppress(Exception):
                await browser.close()
            await jail.close()
            raise
        session = BrowserSession(key, browser, context, jail, self.settings, workspace, keep_profile=keep)
        self._sessions[key] = session
        self.launched += 1
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="browser-idle-sweep")
        return session

    async def _make_room(self) -> None:
        while len(self._sessions) + len(self._starting) > self.settings.max_sessions:
            idle = [s for s in self._sessions.values() if not s.lock.locked()]
            if not idle:
                raise ToolError(f"all {self.settings.max_sessions} browsers are in use by other chats; "
                                "try again in a minute")
            oldest = min(idle, key=lambda s: s.used)
            log.info("browser of %s closed to make room for another", oldest.key)
            await self.close_session(oldest.key)

    async def _driver_started(self) -> Any:
        async with self._driver_lock:
            if self._playwright is None:
                from playwright.async_api import async_playwright

                self._driver = async_playwright()
                self._playwright = await self._driver.start()
            return self._playwright

    def abort(self, key: str) -> None:
        """The session's run was stopped: close its pages at once."""
        session = self._sessions.get(key)
        if session is not None:
            session.abort()

    async def close_session(self, key: str) -> bool:
        session = self._sessions.pop(key, None)
        if session is None:
            return False
        session.abort()
        await session.close()
        log.info("browser of %s closed", key)
        return True

    async def _sweep(self) -> None:
        every = min(SWEEP_EVERY, max(0.05, self.settings.idle_timeout / 4))
        while self._sessions:
            await asyncio.sleep(every)
            now = time.monotonic()
            for key, session in list(self._sessions.items()):
                if not session.lock.locked() and now - session.used > self.settings.idle_timeout:
                    log.info("browser of %s idle for %g s: closed", key, self.settings.idle_timeout)
                    await self.close_session(key)

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for starting in list(self._starting.values()):
            starting.cancel()
        for key in list(self._sessions):
            with contextlib.suppress(Exception):
                await self.close_session(key)
        if self._driver is not None:
            with contextlib.suppress(Exception):
                await self._driver.__aexit__(None, None, None)
            self._driver = self._playwright = None
