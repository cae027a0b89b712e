"""What the probes answer: alive (``/healthz``), started (``/startupz``), ready (``/readyz``).

Ready means: started (the channels listen and what was owed went out), the store answers and
has every migration, each channel's platform answers (a channel offering ``Connects``), the
cluster heartbeat renews this instance's leases (several instances). What is not ready is one
short line each, with no secret (a channel's trouble is its own wording; a store error is its
class).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from bot.channels import Channel, Connects
from bot.observe import Observed, Signal

STORE_TIMEOUT = 3.0  # seconds the store has to answer a readiness look
TICK = 0.5  # seconds between two looks at the event loop's lag


def connections(channels: Mapping[str, Channel]) -> dict[str, bool]:
    """platform -> whether it answers now (a channel without ``Connects``: yes)."""
    return {name: not (isinstance(c, Connects) and c.trouble() is not None) for name, c in channels.items()}


@dataclass
class Probes:
    channels: Mapping[str, Channel]
    store_ready: Callable[[], Awaitable[str | None]]  # None: reachable and migrated; else why not
    started: bool = False
    heartbeat_ok: bool = True  # several instances: the last heartbeat renewed the leases
    lag: float = 0.0  # seconds the event loop was late at the last tick

    def on_signal(self, observed: Observed) -> None:
        if observed.kind is Signal.HEARTBEAT:
            self.heartbeat_ok = observed.value > 0

    async def not_ready(self) -> list[str]:
        if not self.started:
            return ["starting"]
        problems: list[str] = []
        try:
            async with asyncio.timeout(STORE_TIMEOUT):
                why = await self.store_ready()
        except TimeoutError:
            why = f"no answer within {STORE_TIMEOUT:g} s"
        except Exception as exc:  # the probe says why in one line; the details are the store's logs
            why = f"unreachable ({type(exc).__name__})"
        if why is not None:
            problems.append(f"store: {why}")
        for name, channel in self.channels.items():
            if isinstance(channel, Connects) and (trouble := channel.trouble()) is not None:
                problems.append(f"{name}: {trouble}")
        if not self.heartbeat_ok:
            problems.append("cluster: the heartbeat cannot renew this instance's leases")
        return problems

    async def ticks(self) -> None:
        """Measure the loop's lag for ever (``/healthz`` shows it; a stuck loop answers nothing)."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + TICK
            await asyncio.sleep(TICK)
            self.lag = max(0.0, loop.time() - due)


def uptime(since: float) -> float:
    return round(time.monotonic() - since, 3)
