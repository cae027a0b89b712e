"""The bot's Prometheus metrics, kept in a registry of their own (never the process-wide one).

They are fed by two streams and one look: the run ``EventBus`` (a run's start, first streamed
text, tool results, its end with its trace: runs by outcome, latencies, model calls, tokens and
cost per model; a title's and a compaction's model calls, beside runs, come as ``calls``
events: model calls, tokens and cost, never runs), the core's signals (``bot.observe``:
messages in, not run, deliveries, /stop, scheduler lag, approvals, MCP server states, cluster
leases), and, at each scrape, the dispatcher's load and the channels' connections.

Labels are bounded: platforms, models and tools come from the configuration, outcomes and
states from enums. No person, chat, session or text is ever a label. Being bounded, each
metric's child per label values is kept once made (``_of``): ``labels()`` takes a lock and
checks its arguments at every call, and a message goes through a dozen of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.agent.events import EventKind, RunEvent
from bot.observe import Observed, Signal
from bot.tracing import Span, SpanKind

if TYPE_CHECKING:
    from prometheus_client import Metric

SUB_AGENT = "(sub-agent)"  # the model label of a sub-agent's tokens and cost (its own calls are its run's)
_LATENCY = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
_FIRST = (0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 60)
_STOP = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)
_LAG = (1, 5, 15, 30, 60, 300, 900, 3600)
_REFUSED = {"refuse": "access", "pair": "pairing", "limit": "limit"}  # NOT_RUN reason -> refused reason
MCP_STATES = ("connecting", "ready", "degraded", "down")
Load = Callable[[], tuple[int, int]]  # (sessions with work, messages waiting)
Connections = Callable[[], Mapping[str, bool]]  # platform -> connected now


class Metrics:
    """Every metric of the bot; ``on_event`` and ``on_signal`` are quick, inline subscribers."""

    def __init__(self, load: Load = lambda: (0, 0), connections: Connections = dict) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.messages = Counter("chatgate_messages_received_total", "Inbound messages stored, per platform",
                                ["platform"], registry=r)
        self.refused = Counter("chatgate_messages_refused_total", "Messages not run and answered with a notice "
                               "(or quietly, past the first): access, pairing, limit", ["platform", "reason"],
                               registry=r)
        self.ignored = Counter("chatgate_messages_ignored_total", "Messages dropped without an answer (policy)",
                               ["platform"], registry=r)
        self.answers = Counter("chatgate_answers_sent_total", "Answers and notices delivered whole", ["platform"],
                               registry=r)
        self.owed = Counter("chatgate_deliveries_owed_total", "Answers handed to delivery", ["platform"], registry=r)
        self.given_up = Counter("chatgate_deliveries_given_up_total", "Answers given up (blocked, chat gone, too "
                                "long an outage)", ["platform"], registry=r)
        self.delivery_seconds = Histogram("chatgate_delivery_duration_seconds", "From the first send of an "
                                          "answer to its last chunk", ["platform"], buckets=_LATENCY, registry=r)
        self.runs = Counter("chatgate_runs_total", "Runs ended, per outcome (completed, silent, failed, cancelled)",
                            ["outcome"], registry=r)
        self.run_seconds = Histogram("chatgate_run_duration_seconds", "A run, from its start to its end",
                                     ["outcome"], buckets=_LATENCY, registry=r)
        self.first_token = Histogram("chatgate_run_first_token_seconds", "From a run's start to its first "
                                     "streamed text", buckets=_FIRST, registry=r)
        self.model_calls = Counter("chatgate_model_calls_total", "Model calls, per model and outcome (ok, error)",
                                   ["model", "outcome"], registry=r)
        self.model_seconds = Histogram("chatgate_model_call_duration_seconds", "A model call, streamed whole",
                                       ["model"], buckets=_LATENCY, registry=r)
        self.tokens = Counter("chatgate_model_tokens_total", "Tokens per model and kind (input, output, "
                              "cache_read, cache_write; cache kinds are parts of input)", ["model", "kind"], registry=r)
        self.cost = Counter("chatgate_model_cost_usd_total", "What the model calls cost, in US dollars",
                            ["model"], registry=r)
        self.tool_calls = Counter("chatgate_tool_calls_total", "Tool calls, per tool and outcome (ok, error)",
                                  ["tool", "outcome"], registry=r)
        self.tool_seconds = Histogram("chatgate_tool_call_duration_seconds", "A tool call", ["tool"],
                                      buckets=_LATENCY, registry=r)
        self.asked = Counter("chatgate_approvals_requested_total", "Tool calls a person was asked to approve",
                             ["tool"], registry=r)
        self.answered = Counter("chatgate_approvals_answered_total", "Approvals ended, per outcome (allowed, "
                                "denied, timed_out, expired)", ["tool", "outcome"], registry=r)
        self.stop_seconds = Histogram("chatgate_stop_duration_seconds", "From /stop to the run's end (its stream "
                                      "closed and its turn stored)", buckets=_STOP, registry=r)
        self.lag = Histogram("chatgate_schedule_lag_seconds", "How late a scheduled occurrence was claimed",
                             buckets=_LAG, registry=r)
        self.leases = Gauge("chatgate_cluster_leases_held", "Leases this instance holds (sessions, channels)",
                            ["kind"], registry=r)
        self._mcp: dict[str, str] = {}  # MCP server -> its state
        self._started: dict[str, float] = {}  # run id -> monotonic start, until its first text
        self._running: set[str] = set()
        r.register(_Now(load, connections, lambda: self._mcp, lambda: len(self._running)))
        self._children: dict[tuple[object, ...], Any] = {}  # (metric, *label values) -> its child
        self._handlers: dict[EventKind, Callable[[RunEvent], None]] = {
            EventKind.STARTED: self._run_started, EventKind.DELTA: self._delta,
            EventKind.TOOL_RESULT: self._tool_result, EventKind.COMPLETED: self._run_ended,
            EventKind.FAILED: self._run_ended, EventKind.CANCELLED: self._run_ended, EventKind.TITLE_CALLS: self._calls,
            EventKind.COMPACTION_CALLS: self._calls,
        }
        self._signals: dict[Signal, Callable[[Observed], None]] = {
            Signal.MESSAGE_IN: lambda s: self._of(self.messages, s.platform).inc(),
            Signal.NOT_RUN: self._not_run,
            Signal.DELIVERY_OWED: lambda s: self._of(self.owed, s.platform).inc(),
            Signal.DELIVERED: self._delivered,
            Signal.GIVEN_UP: lambda s: self.given_up.labels(s.platform).inc(),
            Signal.STOPPED: lambda s: self.stop_seconds.observe(s.value),
            Signal.SCHEDULE_LAG: lambda s: self.lag.observe(s.value),
            Signal.APPROVAL_ASKED: lambda s: self.asked.labels(s.name).inc(),
            Signal.APPROVAL_ANSWERED: lambda s: self.answered.labels(s.name, s.reason).inc(),
            Signal.MCP_STATE: self._mcp_state,
            Signal.LEASES: lambda s: self.leases.labels(s.name).set(s.value),
        }

    def _of(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, made once."""
        key = (metric, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # -- the run events -----------------------------------------------------------------

    def on_event(self, event: RunEvent) -> None:
        handler = self._handlers.get(event.kind)
        if handler is not None:
            handler(event)

    def _run_started(self, event: RunEvent) -> None:
        self._started[event.run_id] = time.monotonic()
        self._running.add(event.run_id)

    def _delta(self, event: RunEvent) -> None:
        began = self._started.pop(event.run_id, None)
        if began is not None:
            self.first_token.observe(time.monotonic() - began)

    def _tool_result(self, event: RunEvent) -> None:
        if event.tool is not None:
            self._of(self.tool_calls, event.tool.name, "error" if event.is_error else "ok").inc()

    def _run_ended(self, event: RunEvent) -> None:
        self._started.pop(event.run_id, None)
        self._running.discard(event.run_id)
        trace = event.trace
        if trace is None:  # an end without its trace (a run built by hand): its outcome only
            self._of(self.runs, event.kind.value.removeprefix("run.")).inc()
            return
        self._of(self.runs, trace.status).inc()
        self._of(self.run_seconds, trace.status).observe(max(0.0, trace.ended_at - trace.started_at))
        self._spans(trace.spans)

    def _calls(self, event: RunEvent) -> None:
        """A title's or a compaction's model calls: counted like a run's, with no run."""
        if event.trace is not None:
            self._spans(event.trace.spans)

    def _spans(self, spans: Iterable[Span]) -> None:
        for span in spans:
            if span.kind is SpanKind.LLM:
                self._of(self.model_calls, span.name, "error" if span.is_error else "ok").inc()
                self._of(self.model_seconds, span.name).observe(span.duration_ms / 1000)
                self._usage(span.name, span.input_tokens, span.output_tokens, span.cache_read_tokens,
                            span.cache_write_tokens, span.cost)
            elif span.kind is SpanKind.TOOL:
                self._of(self.tool_seconds, span.name).observe(span.duration_ms / 1000)
            elif span.kind is SpanKind.AGENT:
                self._usage(SUB_AGENT, span.input_tokens, span.output_tokens, span.cache_read_tokens,
                            span.cache_write_tokens, span.cost)

    def _usage(self, model: str, given: int, out: int, read: int, written: int, cost: float) -> None:
        for kind, n in (("input", given), ("output", out), ("cache_read", read), ("cache_write", written)):
            if n:
                self._of(self.tokens, model, kind).inc(n)
        if cost:
            self._of(self.cost, model).inc(cost)

    # -- the core's signals -------------------------------------------------------------

    def on_signal(self, observed: Observed) -> None:
        handler = self._signals.get(observed.kind)
        if handler is not None:
            handler(observed)

    def _not_run(self, s: Observed) -> None:
        if s.reason in _REFUSED:
            self._of(self.refused, s.platform, _REFUSED[s.reason]).inc()
        else:
            self._of(self.ignored, s.platform).inc()

    def _delivered(self, s: Observed) -> None:
        self._of(self.answers, s.platform).inc()
        self._of(self.delivery_seconds, s.platform).observe(s.value)

    def _mcp_state(self, s: Observed) -> None:
        self._mcp[s.name] = s.reason


class _Now(Collector):
    """What is read at each scrape: the dispatcher's load, the runs being computed, the channels'
    connections, MCP servers by state."""

    def __init__(self, load: Load, connections: Connections, mcp: Callable[[], Mapping[str, str]],
                 active: Callable[[], int]) -> None:
        self._load, self._connections, self._mcp, self._active = load, connections, mcp, active

    def collect(self) -> Iterable[Metric]:
        busy, waiting = self._load()
        yield GaugeMetricFamily("chatgate_runs_active", "Runs being computed now", self._active())
        yield GaugeMetricFamily("chatgate_sessions_busy", "Sessions with a run or messages waiting here", busy)
        yield GaugeMetricFamily("chatgate_messages_waiting", "Messages waiting in the sessions' queues here", waiting)
        up = GaugeMetricFamily("chatgate_channel_up", "1 while the platform answers, 0 when not", labels=["platform"])
        for platform, connected in sorted(self._connections().items()):
            up.add_metric([platform], 1 if connected else 0)
        yield up
        states = list(self._mcp().values())
        servers = GaugeMetricFamily("chatgate_mcp_servers", "MCP servers per state", labels=["state"])
        for state in MCP_STATES:
            servers.add_metric([state], states.count(state))
        yield servers
