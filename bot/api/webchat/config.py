"""``webchat:``, the web chat's section: off unless ``enabled``; its own ``bind`` (this machine
only unless ``allow_remote``, then with TLS or behind a TLS proxy, as the dashboard)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field, model_validator

from bot.api.config import checked_bind
from bot.config import CapabilitySection
from bot.errors import ConfigError

DEFAULT_WEBCHAT_BIND = "127.0.0.1:8701"


class WebchatConfig(CapabilitySection):
    model_config = ConfigDict(json_schema_extra={"description": (
        "the web chat for the bot's people: docs/guide/webchat.md")})

    enabled: bool = Field(default=False, description="true: `chatgate run` serves the chat page; sign-in links come "
        "from `chatgate webchat invite PERSON`")
    bind: str = Field(default=DEFAULT_WEBCHAT_BIND, description="host:port; the same rule as api.bind")
    allow_remote: bool = Field(default=False, description="a non-loopback bind: needs tls_cert + tls_key, or "
        "behind_proxy")
    tls_cert: Path | None = Field(default=None, description="PEM certificate (chain): the web chat serves https")
    tls_key: Path | None = Field(default=None, description="the certificate's private key (PEM)")
    behind_proxy: bool = Field(default=False, description="a TLS proxy in front: trust its X-Forwarded-Proto/-Host")
    public_url: str = Field(default="", description="the address people open, for invite links (default: http://bind)")
    invite_hours: float = Field(default=24.0, description="a sign-in link works once within this")
    session_days: float = Field(default=30.0, description="how long a sign-in lasts")
    max_upload_mb: float = Field(default=20.0, description="the largest file a person may upload")

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
