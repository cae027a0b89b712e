"""``tools.browser``: the browser tool's section, and the settings its parts take."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from bot.config.types import CapabilitySection, Float, Int
from bot.tools.sandbox import ExecSettings

Profile = Literal["session", "per-person"]


class BrowserConfig(CapabilitySection):
    """Off by default. Chromium runs in the exec sandbox's world, bounded by ``tools.exec.limits``."""

    enabled: bool = False
    executable: Path = Path("/usr/bin/chromium")  # Debian's chromium; never a browser download
    allow_private: bool = False  # lift the address fence (a homelab's own pages)
    profile: Profile = "session"  # per-person: a person's cookies kept in their workspace (.browser/)
    max_pages: Annotated[Int, Field(ge=1, le=50)] = 4  # open pages (tabs) per session
    max_sessions: Annotated[Int, Field(ge=1, le=64)] = 4  # browsers at once (one per session)
    idle_timeout: Annotated[Float, Field(gt=0)] = 300.0  # seconds before an unused browser is closed
    action_timeout: Annotated[Float, Field(gt=0, le=600)] = 30.0  # seconds for one action
    snapshot_chars: Annotated[Int, Field(ge=1000, le=200_000)] = 12_000  # of one page snapshot

    def warnings(self) -> list[str]:
        if self.enabled and self.allow_private:
            return ["tools.browser.allow_private is true: the browser may reach this host's and its "
                    "network's private addresses (the cloud metadata address too)"]
        return []

    def describe(self) -> list[str]:
        if not self.enabled:
            return []
        fence = "no address fence (allow_private)" if self.allow_private else "public addresses only"
        return [f"browser    {self.executable} in bubblewrap, {fence}, up to {self.max_sessions} browsers of "
                f"{self.max_pages} pages, closed after {self.idle_timeout:g} s idle, profile {self.profile}"]


@dataclass(frozen=True, slots=True)
class BrowserSettings:
    """What the browser's parts take: the section, with the exec sandbox's world and bounds."""

    executable: Path = Path("/usr/bin/chromium")
    allow_private: bool = False
    profile: Profile = "session"
    max_pages: int = 4
    max_sessions: int = 4
    idle_timeout: float = 300.0
    action_timeout: float = 30.0
    snapshot_chars: int = 12_000
    sandbox: ExecSettings = field(default_factory=ExecSettings)  # private paths and tools.exec.limits

    @classmethod
    def of(cls, section: BrowserConfig, sandbox: ExecSettings) -> BrowserSettings:
        return cls(section.executable, section.allow_private, section.profile, section.max_pages,
                   section.max_sessions, section.idle_timeout, section.action_timeout, section.snapshot_chars,
                   sandbox)
