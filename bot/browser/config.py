"""``tools.browser``: the browser tool's section, and the settings its parts take."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from bot.config.types import CapabilitySection, Float, Int
from bot.tools.sandbox import ExecSettings

Profile = Literal["session", "per-person"]


class BrowserConfig(CapabilitySection):
    """Off by default. Chromium runs in the exec sandbox's world, bounded by ``tools.exec.limits``."""

    model_config = ConfigDict(json_schema_extra={"description": (
        "a real browser (JavaScript, clicks, forms): docs/guide/browser.md")})

    enabled: bool = Field(default=False, description="Chromium runs in exec's sandbox (bubblewrap, even when exec "
        "is off), bounded by tools.exec.limits, every request through the address fence")
    executable: Path = Field(default=Path("/usr/bin/chromium"), description="Debian's chromium (apt-get install "
        "chromium); never downloaded")
    allow_private: bool = Field(default=False, description="true also reaches private/loopback/metadata addresses "
        "(as web_fetch)")
    profile: Profile = Field(default="session", description="per-person: a person's cookies kept in their workspace "
        "(.browser/)")
    max_pages: Annotated[Int, Field(ge=1, le=50)] = Field(default=4, description="open pages per chat")
    max_sessions: Annotated[Int, Field(ge=1, le=64)] = Field(default=4, description="browsers at once (one per "
        "chat); the one idle longest makes room")
    idle_timeout: Annotated[Float, Field(gt=0)] = Field(default=300.0, description="seconds before an unused "
        "browser is closed")
    action_timeout: Annotated[Float, Field(gt=0, le=600)] = Field(default=30.0, description="seconds for one action "
        "(open, click ...)")
    snapshot_chars: Annotated[Int, Field(ge=1000, le=200_000)] = Field(default=12_000, description="of one page "
        "snapshot given to the model")

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
