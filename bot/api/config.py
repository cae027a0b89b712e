"""``api:``, the section of the OpenAI-compatible API: off unless ``enabled``; served on
``bind``, this machine only unless ``allow_remote`` (then with TLS or behind a TLS proxy: the
rule every server shares, ``bot.config.binds``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field, model_validator

from bot.config import CapabilitySection
from bot.config.binds import is_loopback, parse_bind
from bot.errors import ConfigError

DEFAULT_API_BIND = "127.0.0.1:8700"


def checked_bind(section: str, bind: str, default: str, *, allow_remote: bool, tls: tuple[Path | None, Path | None],
                 behind_proxy: bool, what: str) -> None:
    """The rule every server of the bot keeps: ``host:port``; a bind other machines can reach only
    with ``allow_remote``, and then only with TLS (both files) or behind a TLS proxy."""
    try:
        host, _ = parse_bind(bind)
    except ValueError:
        raise ConfigError(f"{section}.bind", f"expected host:port such as {default}, got {bind!r}") from None
    cert, key = tls
    if (cert is None) != (key is None):
        raise ConfigError(f"{section}.tls_key" if key is None else f"{section}.tls_cert", "missing",
                          "https needs both tls_cert and tls_key")
    if not is_loopback(host) and not allow_remote:
        raise ConfigError(f"{section}.bind", f"{bind} can be reached from other machines, and {what} binds to this "
                          "machine only", f"use 127.0.0.1 (a reverse proxy or an SSH tunnel in front), or set "
                          f"{section}.allow_remote: true with tls_cert and tls_key or behind_proxy")
    if allow_remote and cert is None and not behind_proxy:
        raise ConfigError(f"{section}.allow_remote", f"a remote {what} needs TLS",
                          f"set {section}.tls_cert and tls_key, or behind_proxy: true behind a TLS proxy")


class ApiConfig(CapabilitySection):
    """The OpenAI-compatible API (``bot.api``): ``/v1/models``, ``/v1/chat/completions`` and
    ``/v1/responses`` for the people who hold a key (``chatgate api key create``)."""

    model_config = ConfigDict(json_schema_extra={"description": "the OpenAI-compatible API: docs/guide/api.md"})

    enabled: bool = Field(default=False, description="true: `chatgate run` serves /v1/models, /v1/chat/completions "
        "and /v1/responses to the holders of a key (chatgate api key create)")
    bind: str = Field(default=DEFAULT_API_BIND, description="host:port; this machine only unless allow_remote")
    allow_remote: bool = Field(default=False, description="a non-loopback bind: needs tls_cert + tls_key, or "
        "behind_proxy")
    tls_cert: Path | None = Field(default=None, description="PEM certificate (chain), e.g. /etc/chatgate/cert.pem: "
        "https")
    tls_key: Path | None = Field(default=None, description="the certificate's private key (PEM), e.g. "
        "/etc/chatgate/key.pem")
    behind_proxy: bool = Field(default=False, description="a TLS proxy in front (it terminates https)")
    max_request_kb: int = Field(default=1024, description="the largest request body taken, in KiB")

    @model_validator(mode="after")
    def _safe_to_serve(self) -> ApiConfig:
        checked_bind("api", self.bind, DEFAULT_API_BIND, allow_remote=self.allow_remote,
                     tls=(self.tls_cert, self.tls_key), behind_proxy=self.behind_proxy, what="the API")
        if self.max_request_kb < 1:
            raise ConfigError("api.max_request_kb", f"must be at least 1, got {self.max_request_kb}")
        return self

    def describe(self) -> list[str]:
        if not self.enabled:
            return []
        scheme = "https" if self.tls_cert is not None or self.behind_proxy else "http"
        return [f"api        OpenAI-compatible at {scheme}://{self.bind}/v1 (keys: chatgate api key list)"]
