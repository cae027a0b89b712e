"""Traces of runs as OpenTelemetry spans, exported over OTLP/HTTP by the official SDK.

A run's trace is built when it ends, from the ``TraceRecord`` its end event carries (what
``chatgate traces`` shows): one trace per run, its root ``invoke_agent`` span, a ``chat``
span per model call, an ``execute_tool`` span per tool call, an ``invoke_agent`` span per
sub-agent, a span per wait for an approval; its answer's delivery, signalled later by the
core (``bot.observe``), is one more span of the same trace. Each span keeps the times the
run recorded. Attributes follow the GenAI semantic conventions (``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``...).

No text anybody wrote is in a span: the session is ``gen_ai.conversation.id``, a hash of its
key (which holds platform ids); only with ``capture_content`` do the previews of model answers
and tool results (capped and scrubbed of secrets, as stored) go in. The SDK's batch processor
exports from its own thread; closing flushes what is left.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping

from opentelemetry import trace as otel
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind as OtelKind
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from bot.agent.events import EventKind, RunEvent
from bot.observe import Observed, Signal
from bot.tracing import Span, SpanKind, TraceRecord

log = logging.getLogger(__name__)

REMEMBERED = 2000  # runs whose trace a later delivery span may join
EXPORT_EVERY_MS = 2000
_ENDS = frozenset({EventKind.COMPLETED, EventKind.FAILED, EventKind.CANCELLED})
NS = 1_000_000_000


def conversation_id(session_key: str) -> str:
    """The session as a trace names it: stable, and naming nobody."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:16]


class RunTraces:
    def __init__(self, url: str, *, headers: Mapping[str, str], service: str, instance: str,
                 providers: Mapping[str, str], capture_content: bool = False, timeout: float = 10.0) -> None:
        resource = Resource.create({"service.name": service, "service.instance.id": instance})
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=url, headers=dict(headers), timeout=timeout),
            schedule_delay_millis=EXPORT_EVERY_MS))
        self.tracer = self.provider.get_tracer("chatgate")
        self._providers = providers  # model -> provider name (the configuration's)
        self._capture = capture_content
        self._runs: OrderedDict[str, otel.SpanContext] = OrderedDict()

    # -- a run, when it ends --------------------------------------------------------------

    def on_event(self, event: RunEvent) -> None:
        if event.kind in _ENDS and event.trace is not None:
            self.run(event.trace, event.conversation.platform)

    def run(self, t: TraceRecord, platform: str) -> None:
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": t.agent_id,
            "gen_ai.conversation.id": conversation_id(t.session_key), "gen_ai.request.model": t.model,
            "gen_ai.usage.input_tokens": t.input_tokens, "gen_ai.usage.output_tokens": t.output_tokens,
            "chatgate.run.id": t.run_id, "chatgate.run.status": t.status, "chatgate.run.iterations": t.iterations,
            "chatgate.cost_usd": t.cost, "chatgate.platform": platform,
        }
        if provider := self._providers.get(t.model):
            attrs["gen_ai.provider.name"] = provider
        root = self.tracer.start_span(f"invoke_agent {t.agent_id}", kind=OtelKind.INTERNAL, attributes=attrs,
                                      start_time=_ns(t.started_at), context=otel.set_span_in_context(otel.INVALID_SPAN))
        if t.status == "failed":
            root.set_status(Status(StatusCode.ERROR, t.error or "failed"))
            root.set_attribute("error.type", "run_failed")
        inside = otel.set_span_in_context(root)
        for span in t.spans:
            self._span(span, inside)
        root.end(end_time=_ns(t.ended_at))
        self._runs[t.run_id] = root.get_span_context()
        while len(self._runs) > REMEMBERED:
            self._runs.popitem(last=False)

    def _span(self, s: Span, inside: otel.Context) -> None:
        attrs: dict[str, AttributeValue]
        if s.kind is SpanKind.LLM:
            name, kind = f"chat {s.name}", OtelKind.CLIENT
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": s.name, "gen_ai.response.model": s.name,
                     "gen_ai.usage.input_tokens": s.input_tokens, "gen_ai.usage.output_tokens": s.output_tokens,
                     "chatgate.cost_usd": s.cost}
            if provider := self._providers.get(s.name):
                attrs["gen_ai.provider.name"] = provider
            if s.cache_read_tokens:
                attrs["gen_ai.usage.cache_read.input_tokens"] = s.cache_read_tokens
            if s.cache_write_tokens:
                attrs["gen_ai.usage.cache_creation.input_tokens"] = s.cache_write_tokens
            if self._capture and s.preview:
                attrs["gen_ai.output.messages"] = json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": s.preview}]}])
        elif s.kind is SpanKind.TOOL:
            name, kind = f"execute_tool {s.name}", OtelKind.INTERNAL
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": s.name}
            if self._capture and s.preview:
                attrs["gen_ai.tool.call.result"] = s.preview
        elif s.kind is SpanKind.AGENT:  # its name is the sub-agent's session key: not shown
            name, kind = "invoke_agent sub-agent", OtelKind.INTERNAL
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub-agent",
                     "gen_ai.usage.input_tokens": s.input_tokens, "gen_ai.usage.output_tokens": s.output_tokens,
                     "chatgate.cost_usd": s.cost}
        else:  # an approval: its preview says who decided, so it stays out
            name, kind = f"chatgate.approval {s.name}", OtelKind.INTERNAL
            attrs = {"gen_ai.tool.name": s.name}
        if s.is_error:
            attrs["error.type"] = "error"
        span = self.tracer.start_span(name, context=inside, kind=kind, attributes=attrs, start_time=_ns(s.started_at))
        if s.is_error:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=_ns(s.started_at + s.duration_ms / 1000))

    # -- its answer's delivery ------------------------------------------------------------

    def on_signal(self, observed: Observed) -> None:
        if observed.kind not in (Signal.DELIVERED, Signal.GIVEN_UP):
            return
        run = self._runs.get(observed.ref)
        if run is None:  # a notice, or an answer of a run this process did not trace
            return
        now = time.time()
        outcome = "sent" if observed.kind is Signal.DELIVERED else "given_up"
        span = self.tracer.start_span("chatgate.delivery", context=otel.set_span_in_context(otel.NonRecordingSpan(run)),
                                      kind=OtelKind.PRODUCER, start_time=_ns(now - observed.value),
                                      attributes={"chatgate.platform": observed.platform,
                                                  "chatgate.delivery.outcome": outcome})
        if outcome == "given_up":
            span.set_status(Status(StatusCode.ERROR, "given up"))
        span.end(end_time=_ns(now))

    async def aclose(self) -> None:
        """Export what is left (bounded by the exporter's timeout), then stop."""
        await asyncio.to_thread(self.provider.shutdown)


def _ns(seconds: float) -> int:
    return int(seconds * NS)
