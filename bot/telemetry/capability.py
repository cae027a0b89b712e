"""The telemetry capability: OpenTelemetry traces of runs, exported over OTLP/HTTP
(``telemetry.otlp_endpoint``). Its spec imports only its config; ``open`` loads the SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.telemetry.config import TelemetryConfig

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig
    from bot.telemetry.export import RunTraces


def providers_of(config: CoreConfig) -> dict[str, str]:
    """model -> provider, as configured (``agent`` and ``models``), for ``gen_ai.provider.name``."""
    found: dict[str, str] = {entry.model: entry.provider for entry in config.models.entries().values()}
    found.setdefault(config.agent.model, config.agent.provider)
    return found


@asynccontextmanager
async def open_telemetry(core: Core) -> AsyncIterator[RunTraces]:
    from bot import observe
    from bot.logs import this_instance
    from bot.telemetry.export import RunTraces

    section = core.config.section("telemetry", TelemetryConfig)
    traces = RunTraces(section.traces_url, headers={k: v.get_secret_value() for k, v in section.headers.items()},
                       service=section.service_name, instance=this_instance(core.config.cluster.instance),
                       providers=providers_of(core.config), capture_content=section.capture_content,
                       timeout=section.timeout)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(traces.aclose)
        stack.callback(observe.listen(traces.on_signal))
        stack.callback(core.events.subscribe(traces.on_event))
        yield traces


SPEC = CapabilitySpec("telemetry", open_telemetry, config=TelemetryConfig,
                      enabled=lambda config: config.section("telemetry", TelemetryConfig).otlp_endpoint is not None)
