"""The browser capability: its spec, and the running object (the tool, /status, the end).

Off by default (``tools.browser.enabled``). Opening it checks that bubblewrap can build the
exec sandbox (Chromium always runs in it) and that the configured Chromium exists; Chromium
itself starts on a session's first action.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.browser.config import BrowserConfig
from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall

if TYPE_CHECKING:
    from bot.browser.browsers import Browsers
    from bot.tools.base import Tool
    from bot.tools.sandbox import ExecSettings

KEY = "tools.browser"


@dataclass(slots=True)
class Browsing:
    browsers: Browsers
    tool: Tool

    def tools(self) -> Sequence[Tool]:
        return (self.tool,)

    async def status_lines(self, call: CommandCall) -> list[str]:
        open_here = call.conversation.session_key in self.browsers.open_sessions
        return [f"Browser: {'open' if open_here else 'not open'} in this chat "
                f"({len(self.browsers.open_sessions)} of {self.browsers.settings.max_sessions} in use)"]

    async def stop(self) -> None:
        await self.browsers.aclose()


def sandbox_of(given: ExecSettings) -> ExecSettings:
    """The exec sandbox's world and bounds, whether exec is on or not (always bubblewrap)."""
    from bot.tools.sandbox import ExecSettings

    return ExecSettings(sandbox="bwrap", network=False, private=given.private, bwrap=given.bwrap, limits=given.limits)


@asynccontextmanager
async def open_browser(core: Core) -> AsyncIterator[Browsing]:
    import asyncio

    from bot.browser.browsers import Browsers
    from bot.browser.config import BrowserSettings
    from bot.browser.tool import browser_tool
    from bot.errors import ConfigError
    from bot.tools.sandbox import require_sandbox

    section = core.config.section(KEY, BrowserConfig)
    sandbox = sandbox_of(core.sandbox)
    if not section.executable.is_file():
        raise ConfigError(f"{KEY}.executable", f"{section.executable} is not there",
                          "apt-get install chromium (never `playwright install`), or set the path of Chromium")
    await asyncio.to_thread(require_sandbox, sandbox, key=KEY)
    browsers = Browsers(BrowserSettings.of(section, sandbox))
    running = Browsing(browsers, browser_tool(browsers, core.config.agent.input_guard))
    try:
        yield running
    finally:
        await browsers.aclose()


SPEC = CapabilitySpec("browser", open_browser, config=BrowserConfig, key=KEY,
                      enabled=lambda config: config.section(KEY, BrowserConfig).enabled)
