"""Traces of runs over OTLP/HTTP: a `chatgate run` with ``telemetry.otlp_endpoint`` exports to a
local receiver (``tests/fakes/otlp_server.py``, decoding the protobuf): one trace per run, a
span per model call, tool call and delivery, the GenAI attributes, and no text anybody wrote;
with ``capture_content`` the answers' previews are there. With telemetry and ops off, neither
SDK is imported."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.otlp_server import FakeCollector, Received
from tests.fakes.telegram_server import FakeTelegram
from tests.test_durability import TOKEN, Bot

ROOT = Path(__file__).resolve().parent.parent
PERSON = 987654321
SECRET_WORDS = "my passport number is X1234567"


@pytest.fixture
async def traced(tmp_path: Path) -> AsyncIterator[tuple[Bot, FakeCollector]]:
    async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, FakeCollector() as collector:
        bot = Bot(tmp_path, llm, tg)
        bot.configure(telegram={"allow_from": [PERSON]},
                      telemetry={"otlp_endpoint": collector.url, "service_name": "chatgate-test",
                                 "headers": {"x-api-key": "collector-key-5678"}})
        try:
            yield bot, collector
        finally:
            await bot.close()


async def two_runs(bot: Bot) -> None:
    tg = bot.tg
    bot.llm.script(Reply.tool_calls([Call("write_file", {"path": "note.txt", "content": SECRET_WORDS}, id="c1")]),
                   Reply.text(f"Saved: {SECRET_WORDS}"))
    tg.push(tg.message(PERSON, f"remember: {SECRET_WORDS}", user_id=PERSON))
    await tg.wait_for(lambda: [s for s in tg.sent if s.chat_id == PERSON], timeout=20)
    tg.push(tg.message(PERSON, "hello there", user_id=PERSON))  # answered by the echo
    await tg.wait_for(lambda: len([s for s in tg.sent if s.chat_id == PERSON]) >= 2, timeout=20)


def by_trace(spans: list[Received]) -> dict[str, list[Received]]:
    found: dict[str, list[Received]] = defaultdict(list)
    for span in spans:
        found[span.trace_id].append(span)
    return found


async def test_one_trace_per_run_with_genai_attributes_and_no_text(traced: tuple[Bot, FakeCollector]) -> None:
    bot, collector = traced
    await bot.start()
    await two_runs(bot)
    # the second answer's delivery is bookkept just after the fake received it: exported at the next
    # export (every 5 s; a run's spans and its delivery's may come in either order), the rest at shutdown
    spans = await collector.wait_for(lambda s: len([x for x in s if x.name == "chatgate.delivery"]) >= 2, timeout=20)
    assert await bot.terminate() == 0
    traces = by_trace(spans)
    runs = [t for t in traces.values() if any(s.name == "invoke_agent main" for s in t)]
    assert len(runs) == 2, [s.name for s in spans]
    # the one other trace is the session's title, made after its first exchange (tests/test_ops_calls.py)
    assert [s.name for t in traces.values() if t not in runs for s in t if not s.parent_id] == ["chatgate.title"]
    first, second = sorted(runs, key=lambda t: min(s.start_ns for s in t))
    for trace in (first, second):
        [root] = [s for s in trace if not s.parent_id]
        assert root.name == "invoke_agent main"
        assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert root.attributes["gen_ai.request.model"] == "fake-model"
        assert root.attributes["gen_ai.provider.name"] == "openai"
        assert root.attributes["chatgate.run.status"] == "completed"
        assert root.attributes["gen_ai.usage.input_tokens"] > 0
        assert root.resource["service.name"] == "chatgate-test"
        assert all(s.parent_id == root.span_id for s in trace if s is not root)
        chats = [s for s in trace if s.attributes.get("gen_ai.operation.name") == "chat"]
        assert chats and all(c.name == "chat fake-model" and c.attributes["gen_ai.usage.output_tokens"] > 0
                             and c.attributes["gen_ai.provider.name"] == "openai" for c in chats)
        assert [s.attributes["chatgate.delivery.outcome"] for s in trace if s.name == "chatgate.delivery"] == ["sent"]
    assert len([s for s in first if s.name.startswith("chat ")]) == 2
    [tool] = [s for s in first if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert (tool.name, tool.attributes["gen_ai.tool.name"]) == ("execute_tool write_file", "write_file")
    everything = repr([(s.name, s.attributes, s.resource) for s in spans])
    for text in ("passport", "X1234567", "hello there", "Saved", str(PERSON)):
        assert text not in everything, text
    assert all(h.get("x-api-key") == "collector-key-5678" for h in collector.headers)
    assert "collector-key-5678" not in bot.log.read_text()


async def test_capture_content_puts_the_previews_in(tmp_path: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, FakeCollector() as collector:
        bot = Bot(tmp_path, llm, tg)
        bot.configure(telegram={"allow_from": [PERSON]},
                      telemetry={"otlp_endpoint": f"{collector.url}/v1/traces", "capture_content": True})
        try:
            await bot.start()
            await two_runs(bot)
            assert await bot.terminate() == 0
        finally:
            await bot.close()
    spans = await collector.wait_for(lambda s: len(by_trace(s)) >= 2)
    outputs = [s.attributes["gen_ai.output.messages"] for s in spans if "gen_ai.output.messages" in s.attributes]
    assert any(SECRET_WORDS in o for o in outputs), outputs
    assert any("gen_ai.tool.call.result" in s.attributes for s in spans)


def test_with_ops_and_telemetry_off_neither_sdk_is_loaded() -> None:
    code = ("import sys, bot.app, bot.commands; from bot.capabilities import registry; registry.specs(); "
            "print([m for m in ('prometheus_client', 'opentelemetry.sdk', 'bot.ops.metrics', 'bot.telemetry.export')"
            " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_delivery_signalled_before_its_runs_record_joins_its_trace() -> None:
    """The answer may go out while its run is still ending: its delivery waits for the run."""
    from bot.telemetry.export import _Delivery, _Resource, _Spans
    from bot.tracing import TraceRecord

    spans = _Spans(_Resource({"service.name": "t"}), {}, capture_content=False)
    out: list = []
    spans.delivery(_Delivery("r1", "telegram", "sent", 1.0, 1.1), out)
    assert out == []
    spans.run(TraceRecord("r1", "agent:main:telegram:dm:1", "main", 0.5, 1.0, "completed", "m"), "telegram", out)
    [root] = [s for s in out if s.name == "invoke_agent main"]
    [delivery] = [s for s in out if s.name == "chatgate.delivery"]
    assert delivery.context.trace_id == root.context.trace_id and delivery.parent.span_id == root.context.span_id
    spans.delivery(_Delivery("a-notice", "telegram", "sent", 2.0, 2.1), out)  # no run ever comes: nothing made
    assert len([s for s in out if s.name == "chatgate.delivery"]) == 1


def test_the_exporters_session_reads_the_environment_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests reads the whole environment at every request while ``trust_env``: the proxies for the
    collector are read once instead; a CA bundle named there keeps requests reading it."""
    from bot.telemetry.export import _session

    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "collector.local")
    proxied = _session("https://otlp.example.com/v1/traces")
    assert not proxied.trust_env and proxied.proxies["https"] == "http://proxy.internal:3128"
    direct = _session("https://collector.local/v1/traces")
    assert not direct.trust_env and "https" not in direct.proxies
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/our-ca.pem")
    assert _session("https://otlp.example.com/v1/traces").trust_env
