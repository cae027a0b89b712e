"""``webchat:``, the web chat's section: off unless ``enabled``; its own ``bind`` (this machine
only unless ``allow_remote``, then with TLS or behind a TLS proxy, as the dashboard)."""

from __future__ import annotations

from pathlib import Path

from pydantic import model_validator

from bot.api.config import checked_bind
from bot.config import CapabilitySection
from bot.errors import ConfigError

DEFAULT_WEBCHAT_BIND = "127.0.0.1:8701"


class WebchatConfig(CapabilitySection):
    enabled: bool = False
    bind: str = DEFAULT_WEBCHAT_BIND  # host:port; loopback only unless allow_remote
    allow_remote: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    behind_proxy: bool = False  # a TLS proxy in front: trust its X-Forwarded-Proto/-Host
    public_url: str = ""  # the address people open (for invite links); "" = http(s)://bind
    invite_hours: float = 24.0  # how long a sign-in link works (once)
    session_days: float = 30.0  # how long a sign-in lasts
    max_upload_mb: float = 20.0  # the largest file a person may upload

    @model_validator(mode="after")
    def _safe_to_serve(self) -> WebchatConfig:
        checked_bind("webchat", self.bind, DEFAULT_WEBCHAT_BIND, allow_remote=self.allow_remote,
                     tls=(self.tls_cert, self.tls_key), behind_proxy=self.behind_proxy, what="the web chat")
        if self.public_url and not self.public_url.startswith(("http://", "https://")):
            raise ConfigError("webchat.public_url", f"expected an http(s) address, got {self.public_url!r}")
        for key in ("invite_hours", "session_days", "max_upload_mb"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"webchat.{key}", "must be more than 0")
        return self

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_cert is not None or self.behind_proxy else "http"
        return (self.public_url or f"{scheme}://{self.bind}").rstrip("/")

    def describe(self) -> list[str]:
        return [f"webchat    {self.url}/ (sign-in links: chatgate webchat invite PERSON)"] if self.enabled else []
