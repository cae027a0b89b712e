"""The Provider contract, run against every provider with its real SDK and the fake server:
OpenAI's Chat Completions and Responses APIs, and Anthropic's Messages API."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from contextlib import aclosing
from typing import Any

import pytest

from bot.errors import (
    ContextTooLongError,
    ProviderAuthError,
    ProviderBusyError,
    ProviderError,
    ProviderRequestError,
    ProviderUnavailableError,
)
from bot.llm import Message, Role, ToolCall, ToolResult
from bot.providers.anthropic import AnthropicProvider
from bot.providers.base import (
    ChatRequest,
    Completed,
    Provider,
    RetryInfo,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from bot.providers.openai import OpenAIProvider
from bot.providers.openai_responses import ResponsesProvider
from bot.providers.retry import RetryPolicy
from tests.fakes.llm_server import Call, FakeLLM, Reply, Tokens

KEY = "sk-test-SECRET-0123456789abcdef"
FAST = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)


CLASSES = {"openai": OpenAIProvider, "responses": ResponsesProvider, "anthropic": AnthropicProvider}


def base_url(kind: str, root: str) -> str:
    return root if kind == "anthropic" else f"{root}/v1"


def build(kind: str, llm: FakeLLM, *, timeout: float = 5.0, **kw: Any) -> OpenAIProvider | AnthropicProvider:
    kw.setdefault("policy", FAST)
    return CLASSES[kind](api_key=KEY, base_url=base_url(kind, llm.base_url), timeout=timeout, **kw)


def request(text: str = "hello", **kw: Any) -> ChatRequest:
    return ChatRequest(model="test-model", system="You are terse.", messages=(Message.user(text),), **kw)


async def collect(provider: Provider, req: ChatRequest, **kw: Any) -> tuple[list[StreamEvent], Completed]:
    async with aclosing(provider.stream(req, **kw)) as stream:
        events = [event async for event in stream]
    assert [type(e) for e in events].count(Completed) == 1 and isinstance(events[-1], Completed)
    return events, events[-1]


@pytest.fixture(params=["openai", "responses", "anthropic"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def provider(kind: str, llm: FakeLLM) -> Any:
    p = build(kind, llm)
    yield p
    await p.aclose()


# ----------------------------------------------------------------------------- streaming


async def test_streams_text_then_one_completed(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.text("Hello there, world!", chunk_size=3))
    events, done = await collect(provider, request())
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3 and "".join(deltas) == "Hello there, world!"
    assert done.message.role is Role.ASSISTANT and done.message.text == "Hello there, world!"
    assert done.stop_reason is StopReason.END_TURN
    assert done.model == "test-model"


async def test_empty_script_echoes_last_user_text(provider: Provider, llm: FakeLLM) -> None:
    _, done = await collect(provider, request("ping 42"))
    assert done.message.text == "echo: ping 42"


async def test_tool_calls_split_across_chunks_are_assembled(provider: Provider, llm: FakeLLM) -> None:
    calls = [Call("get_weather", {"city": "Paris", "units": "metric"}, id="call_1"),
             Call("search", {"query": "a longer query with \"quotes\" and ünïcode"}, id="call_2")]
    llm.script(Reply.tool_calls(calls, text="Checking.", chunk_size=2))
    events, done = await collect(provider, request())
    pieces = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(pieces) > 10  # really split
    for index, call in enumerate(calls):
        mine = [p for p in pieces if p.index == index]
        assert (mine[0].id, mine[0].name) == (call.id, call.name)
        assert all(p.id is None and p.name is None for p in mine[1:])
        assert json.loads("".join(p.arguments for p in mine)) == call.arguments
    assert done.message.text == "Checking."
    assert [type(p) for p in done.message.parts][-2:] == [ToolCall, ToolCall]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in done.message.tool_calls] == [
        (c.id, c.name, c.arguments) for c in calls]
    assert done.stop_reason is StopReason.TOOL_USE


async def test_usage_is_normalised(provider: Provider, llm: FakeLLM, kind: str) -> None:
    llm.script(Reply.text("hi", usage=Tokens(input=1200, output=34, cache_read=800, cache_write=100)))
    _, done = await collect(provider, request())
    # Chat Completions does not report cache writes; Anthropic's input_tokens leaves out cached ones.
    assert done.usage == Usage(1200, 34, 800, 0 if kind == "openai" else 100)


@pytest.mark.parametrize(("stop", "openai", "anthropic"), [
    ("end_turn", StopReason.END_TURN, StopReason.END_TURN),
    ("max_tokens", StopReason.MAX_TOKENS, StopReason.MAX_TOKENS),
    ("stop_sequence", StopReason.END_TURN, StopReason.STOP_SEQUENCE),
    ("content_filter", StopReason.CONTENT_FILTER, StopReason.REFUSAL),
    ("refusal", StopReason.CONTENT_FILTER, StopReason.REFUSAL),
])
async def test_stop_reasons(provider: Provider, llm: FakeLLM, kind: str, stop: str,
                            openai: StopReason, anthropic: StopReason) -> None:
    llm.script(Reply.text("partial", stop=stop))
    _, done = await collect(provider, request())
    assert done.stop_reason is (anthropic if kind == "anthropic" else openai)


# ----------------------------------------------------------------------------- retries


async def test_429_retry_after_is_honoured(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.error(429, retry_after=1), Reply.text("ok"))
    seen: list[RetryInfo] = []
    started = time.monotonic()
    _, done = await collect(provider, request(), on_retry=seen.append)
    waited = time.monotonic() - started
    assert done.message.text == "ok"
    assert waited >= 0.95, waited
    assert seen == [RetryInfo(attempt=1, max_retries=2, delay=1.0, reason="429 rate limited")]
    assert len(llm.requests) == 2


async def test_retry_after_ms_is_honoured(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.error(529, retry_after_ms=300), Reply.text("ok"))
    started = time.monotonic()
    await collect(provider, request())
    assert time.monotonic() - started >= 0.28


async def test_retry_after_above_cap_is_busy_at_once(kind: str, llm: FakeLLM) -> None:
    llm.script(Reply.error(429, retry_after=120))
    calls: list[RetryInfo] = []
    async with build(kind, llm, policy=RetryPolicy(max_retries=3, retry_after_cap=10)) as p:
        started = time.monotonic()
        with pytest.raises(ProviderBusyError) as caught:
            await collect(p, request(), on_retry=calls.append)
    assert time.monotonic() - started < 5  # no wait at all (a wait would be the cap's 10 s)
    assert calls == [] and len(llm.requests) == 1
    assert "2 minutes" in caught.value.user_message


async def test_529_and_500_are_retried_with_attempt_numbers(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.error(529), Reply.error(500), Reply.text("fine"))
    seen: list[RetryInfo] = []

    async def on_retry(info: RetryInfo) -> None:  # async callbacks are awaited
        await asyncio.sleep(0)
        seen.append(info)

    _, done = await collect(provider, request(), on_retry=on_retry)
    assert done.message.text == "fine"
    assert [(i.attempt, i.max_retries, i.reason) for i in seen] == [
        (1, 2, "529 overloaded"), (2, 2, "500 server error")]
    assert all(0 <= i.delay <= 0.05 for i in seen)
    assert not any("x-stainless-retry-count" in r.headers for r in llm.requests)  # no SDK, and no SDK's retries


async def test_failing_on_retry_callback_does_not_break_the_request(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.error(503), Reply.text("still fine"))

    def on_retry(info: RetryInfo) -> None:
        raise RuntimeError("callback bug")

    _, done = await collect(provider, request(), on_retry=on_retry)
    assert done.message.text == "still fine"


@pytest.mark.parametrize(("status", "error"), [
    (429, ProviderBusyError), (529, ProviderBusyError), (500, ProviderUnavailableError),
    (502, ProviderUnavailableError), (503, ProviderUnavailableError), (504, ProviderUnavailableError),
])
async def test_retries_exhausted_raise_typed_error(provider: Provider, llm: FakeLLM, status: int,
                                                   error: type[ProviderError]) -> None:
    llm.script(*[Reply.error(status)] * 3)
    with pytest.raises(error) as caught:
        await collect(provider, request())
    assert type(caught.value) is error
    assert caught.value.status == status and caught.value.user_message
    assert len(llm.requests) == 3  # 1 + max_retries, and not one more from an SDK


async def test_no_sdk_internal_retries(kind: str, llm: FakeLLM) -> None:
    llm.script(Reply.error(500), Reply.error(429), Reply.error(503))
    async with build(kind, llm, policy=RetryPolicy(max_retries=0)) as p:
        with pytest.raises(ProviderUnavailableError):
            await collect(p, request())
    await asyncio.sleep(0.1)
    assert len(llm.requests) == 1


async def test_connection_refused_is_retried_then_unavailable(kind: str, unused_tcp_port: int) -> None:
    url = base_url(kind, f"http://127.0.0.1:{unused_tcp_port}")
    seen: list[RetryInfo] = []
    async with CLASSES[kind](api_key=KEY, base_url=url, timeout=2.0, policy=FAST) as p:
        with pytest.raises(ProviderUnavailableError) as caught:
            await collect(p, request(), on_retry=seen.append)
    assert [i.reason for i in seen] == ["connection error"] * 2
    assert caught.value.user_message == ProviderUnavailableError.user_message


async def test_read_timeout_during_hang_is_retried_then_unavailable(kind: str, llm: FakeLLM) -> None:
    llm.script(Reply.hang(), Reply.hang())
    async with build(kind, llm, timeout=0.3, policy=RetryPolicy(max_retries=1, base_delay=0.01)) as p:
        started = time.monotonic()
        with pytest.raises(ProviderUnavailableError, match="timeout"):
            await collect(p, request())
    assert time.monotonic() - started < 2.0
    assert len(llm.requests) == 2


# ----------------------------------------------------------------------------- error mapping


@pytest.mark.parametrize(("status", "code", "error"), [
    (401, None, ProviderAuthError),
    (403, None, ProviderAuthError),
    (400, "context_length_exceeded", ContextTooLongError),
    (400, None, ProviderRequestError),
    (404, None, ProviderRequestError),
    (422, None, ProviderRequestError),
])
async def test_client_errors_are_typed_with_a_user_message(provider: Provider, llm: FakeLLM, kind: str,
                                                           status: int, code: str | None,
                                                           error: type[ProviderError]) -> None:
    llm.script(Reply.error(status, code, message=None if code else "the server's own words"))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request())
    err = caught.value
    assert type(err) is error
    assert err.status == status and err.provider == CLASSES[kind].name
    assert err.user_message.endswith(".") and "\n" not in err.user_message
    if code is None:
        assert "the server's own words" in str(err) and "the server's own words" not in err.user_message
    assert len(llm.requests) == 1


async def test_api_key_never_reaches_errors_or_logs(provider: Provider, llm: FakeLLM,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    llm.script(Reply.error(500, message=f"upstream said {KEY}"), Reply.error(401, message=f"bad key {KEY}"))
    with pytest.raises(ProviderAuthError) as caught:
        await collect(provider, request())
    assert KEY not in str(caught.value) and KEY not in caught.value.user_message
    assert "bad key ***" in str(caught.value)
    logging.getLogger("test").exception("run failed", exc_info=caught.value)  # what an agent loop would do
    assert KEY not in caplog.text
    assert KEY not in "".join(traceback.format_exception(caught.value))


async def test_malformed_body_is_unavailable_not_an_sdk_error(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.malformed())
    with pytest.raises(ProviderUnavailableError, match="malformed"):
        await collect(provider, request())
    assert len(llm.requests) == 1


async def test_error_event_before_any_output_is_retried(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.text("never shown", error_after=0), Reply.text("second try"))
    _, done = await collect(provider, request())
    assert done.message.text == "second try" and len(llm.requests) == 2


@pytest.mark.parametrize("failure", [{"error_after": 2}, {"cut_after": 2}])
async def test_failure_mid_stream_is_unavailable_and_not_retried(provider: Provider, llm: FakeLLM,
                                                                 failure: dict[str, int]) -> None:
    llm.script(Reply.text("a long answer that breaks", chunk_size=2, **failure))
    received: list[StreamEvent] = []
    with pytest.raises(ProviderUnavailableError):
        async with aclosing(provider.stream(request())) as stream:
            async for event in stream:
                received.append(event)
    assert [type(e) for e in received] == [TextDelta, TextDelta]
    assert len(llm.requests) == 1


# ----------------------------------------------------------------------------- cancellation


async def test_cancel_mid_stream_closes_the_connection(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.text("x" * 200, chunk_size=1, delay=0.05))
    first = asyncio.Event()

    async def consume() -> None:
        async with aclosing(provider.stream(request())) as stream:
            async for _ in stream:
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 2)
    task.cancel()
    started = time.monotonic()
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 0.5)
    assert time.monotonic() - started < 0.5
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not llm.requests[0].finished.is_set()


async def test_aclose_mid_stream_closes_the_connection(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.text("y" * 200, chunk_size=1, delay=0.05))
    stream = provider.stream(request())
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 0.5)


async def test_cancel_while_server_hangs_closes_the_connection(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.hang())
    task = asyncio.create_task(collect(provider, request()))
    await llm.wait_for_requests(1)
    task.cancel()
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 0.5)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancel_during_backoff_ends_at_once(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.error(429, retry_after=30))
    waiting = asyncio.Event()
    task = asyncio.create_task(collect(provider, request(), on_retry=lambda info: waiting.set()))
    await asyncio.wait_for(waiting.wait(), 2)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5  # not the 30 s the backoff would have waited
    assert len(llm.requests) == 1


# ----------------------------------------------------------------------------- history


async def test_tool_round_trip_keeps_pairing(provider: Provider, llm: FakeLLM) -> None:
    llm.script(Reply.tool_calls([Call("lookup", {"q": "x"}), Call("lookup", {"q": "y"})]), Reply.text("done"))
    first = request("look up x and y")
    _, done = await collect(provider, first)
    results = Message(Role.TOOL, tuple(ToolResult(c.id, f"result {i}")
                                       for i, c in enumerate(done.message.tool_calls)))
    follow_up = ChatRequest(model=first.model, system=first.system,
                            messages=(*first.messages, done.message, results))
    _, final = await collect(provider, follow_up)
    assert final.message.text == "done"
    llm.assert_tool_pairing()
