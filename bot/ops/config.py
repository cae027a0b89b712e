"""``ops:``, the section of the operator's HTTP server (probes and ``/metrics``). Kept apart from
the server: with ``ops`` off only this small model is loaded (no ``prometheus_client``)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from bot.config import CapabilitySection
from bot.config.binds import is_loopback, parse_bind
from bot.config.types import Secret, secret
from bot.errors import ConfigError

DEFAULT_OPS_BIND = "127.0.0.1:9464"


class OpsConfig(CapabilitySection):
    """Probes (``/healthz``, ``/readyz``, ``/startupz``) and Prometheus metrics (``/metrics``)."""

    model_config = ConfigDict(json_schema_extra={"description": (
        "probes and Prometheus metrics for whoever runs the bot: docs/operations/observability.md")})

    enabled: bool = Field(default=False, description="true: `chatgate run` serves /healthz /readyz /startupz /metrics")
    bind: str = Field(default=DEFAULT_OPS_BIND, description="host:port; anything but loopback is refused unless "
        "allow_remote")
    allow_remote: bool = Field(default=False, description="true: other machines may connect (Kubernetes probes, a "
        "Prometheus elsewhere); the probes and metrics name nobody and carry no text")
    token: Secret = secret("CHATGATE_OPS_TOKEN", description="set: /metrics wants \"Authorization: Bearer "
        "<token>\"")

    @model_validator(mode="after")
    def _safe_to_serve(self) -> OpsConfig:
        try:
            host, _ = parse_bind(self.bind)
        except ValueError:
            raise ConfigError("ops.bind", f"expected host:port such as {DEFAULT_OPS_BIND}, got {self.bind!r}") from None
        if self.enabled and not is_loopback(host) and not self.allow_remote:
            raise ConfigError("ops.bind", f"{self.bind} can be reached from other machines, and the ops server "
                              "binds to this machine only", "use 127.0.0.1, or set ops.allow_remote: true "
                              "(and ops.token to guard /metrics) where a probe or Prometheus runs elsewhere")
        return self

    def warnings(self) -> list[str]:
        if self.enabled and self.allow_remote and self.token is None:
            return ["ops.allow_remote without ops.token: anyone who reaches the port reads /metrics"]
        return []

    def describe(self) -> list[str]:
        if not self.enabled:
            return []
        guard = ", /metrics needs a token" if self.token is not None else ""
        return [f"ops        http://{self.bind} (/healthz /readyz /startupz /metrics{guard})"]
