"""``telemetry:``, where traces of runs are exported (OTLP/HTTP). Off until ``otlp_endpoint`` is
set; with it off only this model is loaded (no OpenTelemetry SDK)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, SecretStr

from bot.config import CapabilitySection
from bot.config.types import Url
from bot.tracing import mask_url


class TelemetryConfig(CapabilitySection):
    """OpenTelemetry traces: one per run, GenAI semantic conventions, no message text by default."""

    model_config = ConfigDict(json_schema_extra={"description": (
        "OpenTelemetry traces of runs, over OTLP/HTTP: docs/operations/observability.md")})

    otlp_endpoint: Url | None = Field(default=None, description="e.g. http://otel-collector:4318 (or its "
        "/v1/traces); null: off")
    headers: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,64}$")], SecretStr] = Field(default={}, description=(
        "sent with every export, secrets: e.g. {x-api-key: \"${OTLP_KEY}\"}"))
    service_name: Annotated[str, Field(min_length=1, max_length=100)] = Field(default="chatgate", description="the "
        "traces' service.name")
    capture_content: bool = Field(default=False, description="true: previews of model answers and tool results go "
        "in the spans")
    timeout: Annotated[float, Field(gt=0, le=60)] = Field(default=10.0, description="seconds an export may take")

    @property
    def traces_url(self) -> str:
        """Where spans are posted: the endpoint's ``/v1/traces`` (as OTEL_EXPORTER_OTLP_ENDPOINT means)."""
        assert self.otlp_endpoint is not None
        url = self.otlp_endpoint.rstrip("/")
        return url if url.endswith("/v1/traces") else f"{url}/v1/traces"

    def secret_values(self) -> tuple[str, ...]:
        return tuple(v.get_secret_value() for v in self.headers.values())

    def warnings(self) -> list[str]:
        if self.otlp_endpoint is not None and self.capture_content:
            return ["telemetry.capture_content: what the model answered and tools returned goes to the collector"]
        return []

    def describe(self) -> list[str]:
        if self.otlp_endpoint is None:
            return []
        extra = f", {len(self.headers)} header(s)" if self.headers else ""
        content = ", with content" if self.capture_content else ""
        return [f"telemetry  traces to {mask_url(self.traces_url)} as {self.service_name}{extra}{content}"]
