"""A session's title and a compaction are model calls beside the runs: the ops metrics count them
(model calls, their duration, tokens and cost; never as runs) and the telemetry exports a trace
for each (a ``chatgate.title`` or ``chatgate.compaction`` root, a ``chat`` span per call with its
model and usage), like a run's calls. The whole App in process, the fake LLM and a local OTLP
receiver; metrics read from the running ops capability's registry."""

from __future__ import annotations

import socket
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.agent.events import EventKind, RunEvent
from bot.app import App
from bot.conversation import Conversation
from bot.messages import ChatType
from bot.ops.metrics import Metrics
from bot.session_keys import SessionKey
from bot.settings import load_config
from bot.tracing import Span, SpanKind, TraceRecord
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.otlp_server import FakeCollector, Received
from tests.test_gateway_runs import OPEN, tg_dm

pytestmark = pytest.mark.timeout(60)
PRICE = {"input": 1000.0, "output": 2000.0}  # USD per million tokens: every call costs something


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[App, RecordingChannel, FakeCollector]]:
    async with FakeCollector() as collector:
        path = tmp_path / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model, compaction: {{trigger_messages: 100, keep_last: 2}}}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}", max_retries: 0}}}}
pricing: {{fake-model: {{input: {PRICE["input"]}, output: {PRICE["output"]}}}}}
storage: {{path: "{tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
ops: {{enabled: true, bind: "127.0.0.1:{free_port()}"}}
telemetry: {{otlp_endpoint: "{collector.url}"}}
{OPEN}
""")
        channel = RecordingChannel("telegram")
        running = App(load_config(path, env={}), {"telegram": channel})
        channel.watch(running.events)
        async with running:
            yield running, channel, collector


async def chat(channel: RecordingChannel, *texts: str) -> None:
    for text in texts:
        before = len(channel.texts())
        await channel.inject(tg_dm(text))
        await channel.wait_for_replies(before + 1)


def roots(spans: list[Received]) -> dict[str, list[Received]]:
    """Root span name -> the spans of each trace it roots (the root first)."""
    traces: dict[str, list[Received]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    found: dict[str, list[Received]] = defaultdict(list)
    for trace in traces.values():
        [root] = [s for s in trace if not s.parent_id]
        found[root.name].append(root)
        found[root.name] += [s for s in trace if s is not root]
    return found


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def test_title_and_compaction_calls_show_in_metrics_and_traces(
        app: tuple[App, RecordingChannel, FakeCollector], llm: FakeLLM) -> None:
    running, channel, collector = app
    await chat(channel, "one")  # the session's first exchange: titled in the background
    await collector.wait_for(lambda s: "chatgate.title" in roots(s), timeout=15)
    await chat(channel, "two", "three")
    llm.script(Reply.text("NO_REPLY"), Reply.text("They said one, two and three."))  # the flush, the summary
    await chat(channel, "/compact")
    assert channel.texts()[-1].startswith("Compacted")
    spans = await collector.wait_for(lambda s: "chatgate.compaction" in roots(s)
                                     and len([x for x in s if x.name == "invoke_agent main"]) == 3, timeout=15)
    traces = roots(spans)

    title_root, *title_calls = traces["chatgate.title"]
    compaction_root, *compaction_calls = traces["chatgate.compaction"]
    assert [s.name for s in title_calls] == ["chat fake-model"]
    assert [s.name for s in compaction_calls] == ["chat fake-model", "chat fake-model"]  # the flush, the summary
    for root, purpose in ((title_root, "title"), (compaction_root, "compaction")):
        assert root.attributes["chatgate.calls.purpose"] == purpose
        assert "gen_ai.operation.name" not in root.attributes  # not an agent's run
        assert root.attributes["gen_ai.usage.input_tokens"] > 0 and root.attributes["chatgate.cost_usd"] > 0
    for call in (*title_calls, *compaction_calls):
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.request.model"] == "fake-model"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0 and call.attributes["gen_ai.usage.output_tokens"] > 0
        assert call.attributes["chatgate.cost_usd"] > 0 and call.end_ns >= call.start_ns
    assert "They said" not in repr([s.attributes for s in spans])  # no text without capture_content

    every_call = [s for s in spans if s.name == "chat fake-model"]
    assert len(every_call) == 3 + 1 + 2  # three runs, the title, the compaction's two
    found = samples(running.capabilities["ops"].metrics)
    model = (("model", "fake-model"),)
    assert found[("chatgate_model_calls_total", (*model, ("outcome", "ok")))] == 6
    assert found[("chatgate_model_call_duration_seconds_count", model)] == 6
    assert found[("chatgate_runs_total", (("outcome", "completed"),))] == 3  # the calls are no runs
    for kind in ("input", "output"):
        assert found[("chatgate_model_tokens_total", (("kind", kind), *model))] == sum(
            s.attributes[f"gen_ai.usage.{kind}_tokens"] for s in every_call)
    assert found[("chatgate_model_cost_usd_total", model)] == pytest.approx(
        sum(s.attributes["chatgate.cost_usd"] for s in every_call))


def test_calls_count_as_model_calls_and_never_as_runs() -> None:
    metrics = Metrics()
    key = SessionKey("main", ChatType.DM, "1", "telegram")
    conversation = Conversation(key, "telegram", "", "1", ChatType.DM)
    spans = (Span(SpanKind.LLM, "m", 10.0, 500, 100, 20, 0.01), Span(SpanKind.LLM, "m", 11.0, 250, 50, 0, 0.0,
                                                                      is_error=True))
    record = TraceRecord("r1-compact", conversation.session_key, "main", 10.0, 12.0, "compaction", "m", 150, 20,
                         0.01, 2, spans=spans)
    metrics.on_event(RunEvent(EventKind.COMPACTION_CALLS, "r1-compact", conversation, trace=record))
    found = samples(metrics)
    assert found[("chatgate_model_calls_total", (("model", "m"), ("outcome", "ok")))] == 1
    assert found[("chatgate_model_calls_total", (("model", "m"), ("outcome", "error")))] == 1
    assert found[("chatgate_model_call_duration_seconds_sum", (("model", "m"),))] == pytest.approx(0.75)
    assert found[("chatgate_model_tokens_total", (("kind", "input"), ("model", "m")))] == 150
    assert found[("chatgate_model_cost_usd_total", (("model", "m"),))] == pytest.approx(0.01)
    assert not [k for k in found if k[0] == "chatgate_runs_total"]
    assert found[("chatgate_runs_active", ())] == 0
