"""The ops HTTP server: ``/healthz``, ``/readyz``, ``/startupz`` (JSON) and ``/metrics``
(Prometheus' text format, written by ``prometheus_client``), on ``ops.bind``.

It listens from the moment the capability opens, before the channels start, so an
orchestrator's startup probe sees the process starting. With ``ops.token`` set, ``/metrics``
wants ``Authorization: Bearer <token>`` (the probes tell nothing private and stay open).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.config.binds import parse_bind
from bot.ops.metrics import Metrics
from bot.ops.probes import Probes, uptime
from bot.web.serve import listen

log = logging.getLogger(__name__)


class OpsServer:
    def __init__(self, bind: str, probes: Probes, metrics: Metrics, *, token: str | None = None) -> None:
        self.host, self.port = parse_bind(bind)
        self.probes, self.metrics = probes, metrics
        self._token = token
        self._runner: web.AppRunner | None = None
        self._since = time.monotonic()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def __aenter__(self) -> OpsServer:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/startupz", self._startupz)
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        self.port = await listen(runner, self.host, self.port, key="ops.bind", shown=f"{self.host}:{self.port}")
        self._runner = runner
        log.info("ops serving %s (/healthz /readyz /startupz /metrics)", self.url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        """Answered at all: the loop runs; its last measured lag says how responsive it is."""
        return _json(200, {"status": "ok", "loop_lag_seconds": round(self.probes.lag, 3),
                           "uptime_seconds": uptime(self._since)})

    async def _startupz(self, request: web.Request) -> web.Response:
        started = self.probes.started
        return _json(200 if started else 503, {"status": "started" if started else "starting"})

    async def _readyz(self, request: web.Request) -> web.Response:
        problems = await self.probes.not_ready()
        if problems:
            return _json(503, {"status": "not ready", "not_ready": problems})
        return _json(200, {"status": "ready"})

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._token is not None and not hmac.compare_digest(
                request.headers.get("Authorization", "").encode(), f"Bearer {self._token}".encode()):
            return web.Response(status=401, text="a bearer token is needed (ops.token)\n",
                                headers={"WWW-Authenticate": "Bearer"})
        # on the loop: labels are bounded, so a scrape is small and quick whatever the traffic (bench/)
        return web.Response(body=generate_latest(self.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.Response(status=status, text=json.dumps(body) + "\n", content_type="application/json")
