"""A local OTLP/HTTP trace receiver: what a collector is to the OpenTelemetry SDK's exporter.

``POST /v1/traces`` takes an ``ExportTraceServiceRequest`` in protobuf (gzip or not), decodes
it with ``opentelemetry-proto`` and keeps each span as a ``Received``: ids in hex, its
attributes as plain Python values, and the resource's attributes. ``headers`` keeps the
headers of every request (an API key configured in ``telemetry.headers``).

    async with FakeCollector() as collector:
        ... telemetry: {otlp_endpoint: collector.url}
        spans = await collector.wait_for(lambda spans: len(spans) >= 3)
"""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fakes.serving import serve


@dataclass(frozen=True)
class Received:
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: int  # 0 unset, 1 ok, 2 error
    resource: dict[str, Any] = field(default_factory=dict)


def value_of(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


class FakeCollector:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.spans: list[Received] = []
        self.headers: list[dict[str, str]] = []
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> FakeCollector:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/traces", self._traces)
        self._runner, self.port = await serve(app, self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_for(self, predicate: Callable[[list[Received]], Any], timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while not predicate(self.spans):
            if time.monotonic() > deadline:
                raise TimeoutError(f"spans so far: {[s.name for s in self.spans]}")
            await asyncio.sleep(0.05)
        return self.spans

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.headers.append(dict(request.headers))
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        for resource_spans in export.resource_spans:
            resource = {kv.key: value_of(kv.value) for kv in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    self.spans.append(Received(
                        s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name, s.kind,
                        s.start_time_unix_nano, s.end_time_unix_nano,
                        {kv.key: value_of(kv.value) for kv in s.attributes}, s.status.code, resource))
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")
