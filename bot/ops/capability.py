"""The ops capability: the operator's HTTP server with probes and Prometheus metrics
(``ops.enabled``). Its spec imports only its config; ``open`` loads the rest
(``prometheus_client`` included), so with ``ops`` off nothing of it is loaded.

It is the first capability to open: it listens to the core's signals before the others
start (an MCP server's first state), and its server answers ``/startupz`` during start-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core
from bot.ops.config import OpsConfig

if TYPE_CHECKING:
    from bot.ops.metrics import Metrics
    from bot.ops.probes import Probes
    from bot.ops.server import OpsServer
    from bot.store.op import Op


@dataclass(slots=True)
class Ops:
    """The running capability: its server, its metrics and what the probes read."""

    server: OpsServer
    metrics: Metrics
    probes: Probes

    def start(self) -> None:
        """The channels listen and what was owed went out: started, and ready when all is well."""
        self.probes.started = True

    async def stop(self) -> None:
        """Shutting down: not ready any more (a load balancer stops sending at once)."""
        self.probes.started = False


def _schema() -> Op[Any]:
    from bot.store.op import value

    return (yield from value("SELECT max(id) FROM migrations"))


@asynccontextmanager
async def open_ops(core: Core) -> AsyncIterator[Ops]:
    from bot import observe
    from bot.ops.metrics import Metrics
    from bot.ops.probes import Probes, connections
    from bot.ops.server import OpsServer
    from bot.store.migrations import SCHEMA_VERSION
    from bot.tasks import OwnedTasks

    section = core.config.section("ops", OpsConfig)

    async def store_ready() -> str | None:
        found = await core.store.read(_schema())
        return None if (found or 0) >= SCHEMA_VERSION else f"migrations pending ({found or 0} of {SCHEMA_VERSION})"

    metrics = Metrics(lambda: core.turns.dispatcher.load(), lambda: connections(core.channels))
    probes = Probes(core.channels, store_ready)
    token = section.token.get_secret_value() if section.token is not None else None
    async with AsyncExitStack() as stack:
        stack.callback(observe.listen(metrics.on_signal))
        stack.callback(observe.listen(probes.on_signal))
        stack.callback(core.events.subscribe(metrics.on_event))
        tasks = OwnedTasks()
        stack.push_async_callback(tasks.stop)
        tasks.spawn(probes.ticks(), "ops loop ticks")
        server = await stack.enter_async_context(OpsServer(section.bind, probes, metrics, token=token))
        yield Ops(server, metrics, probes)


SPEC = CapabilitySpec("ops", open_ops, config=OpsConfig,
                      enabled=lambda config: config.section("ops", OpsConfig).enabled)
