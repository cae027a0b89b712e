"""Traces of runs as OpenTelemetry spans, exported over OTLP/HTTP by the official SDK.

A run's trace is built when it ends, from the ``TraceRecord`` its end event carries (what
``chatgate traces`` shows): one trace per run, its root ``invoke_agent`` span, a ``chat``
span per model call, an ``execute_tool`` span per tool call, an ``invoke_agent`` span per
sub-agent, a span per wait for an approval; its answer's delivery, signalled later by the
core (``bot.observe``), is one more span of the same trace. A title's or a compaction's model
calls (a ``calls`` event) are a trace of their own: a ``chatgate.title`` or
``chatgate.compaction`` root with a ``chat`` span per call. Each span keeps the times the
run recorded. Attributes follow the GenAI semantic conventions (``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``...).

No text anybody wrote is in a span: the session is ``gen_ai.conversation.id``, a hash of its
key (which holds platform ids); only with ``capture_content`` do the previews of model answers
and tool results (capped and scrubbed of secrets, as stored) go in.

What it costs the bot: the event loop only queues what ended (a run's record, a delivery),
O(1). One thread of its own (``_Shipper``) turns them into spans, every ``EXPORT_EVERY``
seconds (the SDK's batch processor's default delay) or as soon as ``BATCH`` wait, and hands
them to the SDK's OTLP/HTTP exporter in one request per batch: a request costs more than the
spans of a few runs (a thread waking cold, requests' machinery), so fewer, larger ones. Its
``requests`` session reads the environment (proxies) once, not at every request, unless a CA
bundle is named there (``REQUESTS_CA_BUNDLE``), which requests only reads per request. The
spans are the SDK's ``ReadableSpan``s made directly, with the times and attributes the run
recorded (no tracer, sampler, span processor or per-span lock: each span is made once,
finished); ids come from the SDK's random id generator. When the collector is away, at most
``QUEUED`` runs wait (the oldest are dropped, counted in a warning). Closing exports what is
left (bounded by the exporter's timeout).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags
from opentelemetry.trace import SpanKind as OtelKind
from opentelemetry.util.types import AttributeValue

from bot.agent.events import EventKind, RunEvent
from bot.observe import Observed, Signal
from bot.tracing import Span, SpanKind, TraceRecord

log = logging.getLogger(__name__)

REMEMBERED = 2000  # runs whose trace a later delivery span may join
EXPORT_EVERY = 5.0  # seconds between two exports at most (OTEL_BSP_SCHEDULE_DELAY's default)
BATCH = 1024  # spans that make an export go at once (and the most in one request)
QUEUED = 10_000  # runs and deliveries waiting to be exported at most (the collector away): the oldest go
_ENDS = frozenset({EventKind.COMPLETED, EventKind.FAILED, EventKind.CANCELLED})
_CALLS = frozenset({EventKind.TITLE_CALLS, EventKind.COMPACTION_CALLS})
NS = 1_000_000_000
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSET, _ERROR = Status(StatusCode.UNSET), Status(StatusCode.ERROR)


def conversation_id(session_key: str) -> str:
    """The session as a trace names it: stable, and naming nobody."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class _Run:
    trace: TraceRecord
    platform: str
    purpose: str = ""  # a run: ""; calls beside one: what for (title, compaction)


@dataclass(frozen=True, slots=True)
class _Delivery:
    run_id: str
    platform: str
    outcome: str  # sent | given_up
    started: float
    ended: float


class _Resource(Resource):
    """The SDK's resource, hashed once: the encoder hashes it for every span it groups."""

    def __init__(self, attributes: Mapping[str, AttributeValue]) -> None:
        super().__init__(dict(Resource.create(dict(attributes)).attributes))
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return other is self or super().__eq__(other)


class RunTraces:
    def __init__(self, url: str, *, headers: Mapping[str, str], service: str, instance: str,
                 providers: Mapping[str, str], capture_content: bool = False, timeout: float = 10.0,
                 exporter: SpanExporter | None = None) -> None:
        self._spans = _Spans(_Resource({"service.name": service, "service.instance.id": instance}), providers,
                             capture_content)
        self._queue: deque[_Run | _Delivery] = deque()
        self._shipper = _Shipper(self._queue, self._spans, exporter or OTLPSpanExporter(
            endpoint=url, headers=dict(headers), timeout=timeout, session=_session(url)))
        self._shipper.start()

    # -- on the event loop: queued, nothing more -------------------------------------------

    def on_event(self, event: RunEvent) -> None:
        if event.kind in _ENDS and event.trace is not None:
            self._put(_Run(event.trace, event.conversation.platform))
        elif event.kind in _CALLS and event.trace is not None:
            self._put(_Run(event.trace, event.conversation.platform, event.kind.removeprefix("calls.")))

    def on_signal(self, observed: Observed) -> None:
        if observed.kind is Signal.DELIVERED or observed.kind is Signal.GIVEN_UP:
            now = time.time()
            self._put(_Delivery(observed.ref, observed.platform,
                                "sent" if observed.kind is Signal.DELIVERED else "given_up", now - observed.value, now))

    def _put(self, item: _Run | _Delivery) -> None:
        self._queue.append(item)  # (a deque's append and popleft are thread-safe)
        if len(self._queue) >= BATCH:
            self._shipper.wake.set()

    async def aclose(self) -> None:
        """Export what is left (bounded by the exporter's timeout), then stop."""
        await asyncio.to_thread(self._shipper.close)


class _Shipper(threading.Thread):
    """The thread that makes the spans and exports them."""

    def __init__(self, queue: deque[_Run | _Delivery], spans: _Spans, exporter: SpanExporter) -> None:
        super().__init__(name="chatgate traces", daemon=True)
        self._queue = queue
        self._spans = spans
        self._exporter = exporter
        self.wake = threading.Event()
        self._closing = False
        self.dropped = 0

    def run(self) -> None:
        while not self._closing:
            self.wake.wait(EXPORT_EVERY)
            self.wake.clear()
            self._ship()

    def close(self) -> None:
        self._closing = True
        self.wake.set()
        if self.is_alive():
            self.join()
        self._ship()  # what came meanwhile (or everything, when the thread never started)
        self._exporter.shutdown()

    def _ship(self) -> None:
        while len(self._queue) > QUEUED:
            self._queue.popleft()
            self.dropped += 1
        if self.dropped:
            log.warning("telemetry: %d runs' traces dropped: the collector did not take them in time", self.dropped)
            self.dropped = 0
        batch: list[ReadableSpan] = []
        while self._queue:
            item = self._queue.popleft()
            try:
                if isinstance(item, _Run):
                    self._spans.run(item.trace, item.platform, batch, item.purpose)
                else:
                    self._spans.delivery(item, batch)
            except Exception:  # one odd record never stops the traces of the others
                log.exception("telemetry: the spans of one run could not be made")
            if len(batch) >= BATCH:
                self._export(batch)
                batch = []
        if batch:
            self._export(batch)

    def _export(self, batch: list[ReadableSpan]) -> None:
        try:
            if self._exporter.export(batch) is not SpanExportResult.SUCCESS:
                log.warning("telemetry: %d spans were not taken by the collector", len(batch))
        except Exception:
            log.exception("telemetry: exporting %d spans failed", len(batch))


class _Spans:
    """A run's record as finished spans (in the shipper's thread only)."""

    def __init__(self, resource: Resource, providers: Mapping[str, str], capture_content: bool) -> None:
        self._resource = resource
        self._scope = InstrumentationScope("chatgate")
        self._providers = providers  # model -> provider name (the configuration's)
        self._capture = capture_content
        self._ids = RandomIdGenerator()
        self._runs: OrderedDict[str, SpanContext] = OrderedDict()
        # deliveries signalled before their run's record came (the answer went out while the run
        # was still ending): joined to it when it comes
        self._early: OrderedDict[str, _Delivery] = OrderedDict()

    def _make(self, name: str, trace_id: int, parent: SpanContext | None, kind: OtelKind,
              attrs: Mapping[str, AttributeValue], start: float, end: float, status: Status = _UNSET) -> ReadableSpan:
        context = SpanContext(trace_id, self._ids.generate_span_id(), False, _SAMPLED)
        return ReadableSpan(name, context, parent, self._resource, attrs, kind=kind, status=status,
                            start_time=_ns(start), end_time=_ns(end), instrumentation_scope=self._scope)

    def run(self, t: TraceRecord, platform: str, out: list[ReadableSpan], purpose: str = "") -> None:
        """A run's trace; with a ``purpose``, the trace of model calls beside a run (a title, a compaction)."""
        attrs: dict[str, AttributeValue] = {
            "gen_ai.agent.name": t.agent_id,
            "gen_ai.conversation.id": conversation_id(t.session_key), "gen_ai.request.model": t.model,
            "gen_ai.usage.input_tokens": t.input_tokens, "gen_ai.usage.output_tokens": t.output_tokens,
            "chatgate.run.id": t.run_id, "chatgate.run.status": t.status, "chatgate.run.iterations": t.iterations,
            "chatgate.cost_usd": t.cost, "chatgate.platform": platform,
        }
        if purpose:
            attrs["chatgate.calls.purpose"] = purpose
        else:
            attrs["gen_ai.operation.name"] = "invoke_agent"
        if provider := self._providers.get(t.model):
            attrs["gen_ai.provider.name"] = provider
        status = _UNSET
        if t.status == "failed":
            status = Status(StatusCode.ERROR, t.error or "failed")
            attrs["error.type"] = "run_failed"
        name = f"chatgate.{purpose}" if purpose else f"invoke_agent {t.agent_id}"
        root = self._make(name, self._ids.generate_trace_id(), None, OtelKind.INTERNAL, attrs,
                          t.started_at, t.ended_at, status)
        parent = root.context
        assert parent is not None
        for span in t.spans:
            out.append(self._span(span, parent))
        out.append(root)
        if purpose:  # no delivery joins it
            return
        self._runs[t.run_id] = parent
        while len(self._runs) > REMEMBERED:
            self._runs.popitem(last=False)
        if (early := self._early.pop(t.run_id, None)) is not None:
            self.delivery(early, out)

    def _span(self, s: Span, parent: SpanContext) -> ReadableSpan:
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
        return self._make(name, parent.trace_id, parent, kind, attrs, s.started_at, s.started_at + s.duration_ms / 1000,
                          _ERROR if s.is_error else _UNSET)

    def delivery(self, d: _Delivery, out: list[ReadableSpan]) -> None:
        """Its answer's delivery, in the run's trace (a notice, or a run not traced here: none)."""
        run = self._runs.get(d.run_id)
        if run is None:  # its run's record may still come (a notice's never does: forgotten in time)
            self._early[d.run_id] = d
            while len(self._early) > REMEMBERED:
                self._early.popitem(last=False)
            return
        out.append(self._make("chatgate.delivery", run.trace_id, run, OtelKind.PRODUCER,
                              {"chatgate.platform": d.platform, "chatgate.delivery.outcome": d.outcome},
                              d.started, d.ended, Status(StatusCode.ERROR, "given up") if d.outcome == "given_up"
                              else _UNSET))


def _session(url: str) -> requests.Session:
    """A session that read the environment's proxies for ``url`` once (requests reads the whole
    environment at every request while ``trust_env``); as it was when a CA bundle is named there."""
    session = requests.Session()
    found = session.merge_environment_settings(url, {}, None, None, None)
    if found["verify"] is True:
        session.proxies.update(found["proxies"])
        session.trust_env = False
    return session


def _ns(seconds: float) -> int:
    return int(seconds * NS)
