"""OpenAI-only behaviour: the Chat Completions wire format and stream quirks of compatible servers."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import openai
import pytest

from bot.errors import ContextTooLongError
from bot.llm import ImagePart, Message, Role, TextPart, ThinkingPart, ToolCall, ToolResult
from bot.providers.base import ChatRequest, StopReason, ThinkingDelta, ToolSpec, Usage
from bot.providers.failures import TransientError
from bot.providers.openai import OpenAIProvider, _Assembler, _is_openai_host, to_openai_messages
from bot.providers.streaming import MALFORMED
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.test_providers_contract import FAST, KEY, collect, request

CALL = ToolCall("call_1", "get_weather", '{"city": "Paris"}')


@pytest.fixture
async def provider(llm: FakeLLM) -> Any:
    async with OpenAIProvider(api_key=KEY, base_url=llm.openai_base_url, timeout=5, policy=FAST) as p:
        yield p


@pytest.mark.parametrize(("messages", "wire"), [
    pytest.param((Message.user("hi"),), [{"role": "user", "content": "hi"}], id="user text as a plain string"),
    pytest.param(
        (Message.user("what is this?", ImagePart("image/png", "iVBORw0KGgo=")),),
        [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}],
        id="image as a data URI"),
    pytest.param(
        (Message(Role.ASSISTANT, (ThinkingPart("hmm", signature="s"), TextPart("Let me check."), CALL)),),
        [{"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}],
        id="assistant tool calls, thinking dropped"),
    pytest.param(
        (Message(Role.ASSISTANT, (CALL,)),),
        [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}],
        id="tool calls without text have null content"),
    pytest.param(
        (Message(Role.TOOL, (ToolResult("call_1", "18C"), ToolResult("call_2", "boom", is_error=True))),),
        [{"role": "tool", "tool_call_id": "call_1", "content": "18C"},
         {"role": "tool", "tool_call_id": "call_2", "content": "boom"}],
        id="one tool message per result"),
    pytest.param(
        (Message(Role.TOOL, (ToolResult("call_1", "18C"), TextPart("[user interrupted]"))),),
        [{"role": "tool", "tool_call_id": "call_1", "content": "18C"},
         {"role": "user", "content": "[user interrupted]"}],
        id="text beside tool results follows them as a user message"),
    pytest.param((Message(Role.ASSISTANT, (ThinkingPart("only thinking", signature="s"),)),),
                 [{"role": "assistant", "content": ""}], id="thinking-only assistant keeps its turn"),
])
def test_messages_to_wire(messages: tuple[Message, ...], wire: list[dict[str, Any]]) -> None:
    assert to_openai_messages("", messages) == wire


def test_system_prompt_is_the_first_message() -> None:
    assert to_openai_messages("Be brief.", (Message.user("hi"),))[0] == {"role": "system", "content": "Be brief."}


@pytest.mark.parametrize(("base_url", "expected"), [
    (None, True), ("https://api.openai.com/v1", True), ("https://eu.api.openai.com/v1", True),
    ("http://localhost:11434/v1", False), ("http://vllm:8000/v1", False), ("https://openai.com.evil.test", False),
])
def test_openai_host_detection(base_url: str | None, expected: bool) -> None:
    assert _is_openai_host(base_url) is expected


async def test_request_body(provider: OpenAIProvider, llm: FakeLLM) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = ToolSpec("get_weather", "Weather for a city.", schema)
    await collect(provider, request(tools=(tool,), temperature=0.2, max_tokens=256))
    body = llm.requests[0].body
    assert llm.requests[0].path == "/v1/chat/completions"
    assert llm.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    # a compatible server (not api.openai.com) gets max_tokens, which vLLM and Ollama know best
    assert body["max_tokens"] == 256 and "max_completion_tokens" not in body
    assert body["temperature"] == 0.2
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city.", "parameters": tool.parameters}}]
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}


async def test_no_temperature_or_tools_unless_asked(provider: OpenAIProvider, llm: FakeLLM) -> None:
    await collect(provider, request())
    assert "temperature" not in llm.requests[0].body and "tools" not in llm.requests[0].body


async def test_reasoning_content_of_compatible_servers_becomes_thinking(provider: OpenAIProvider,
                                                                       llm: FakeLLM) -> None:
    llm.script(Reply.thinking("step one, step two", text="42"))
    events, done = await collect(provider, request())
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "step one, step two"
    assert done.message.parts == (ThinkingPart("step one, step two"), TextPart("42"))


async def test_context_too_long_error_in_stream(provider: OpenAIProvider, llm: FakeLLM) -> None:
    llm.script(Reply.error(400, "context_length_exceeded"))
    with pytest.raises(ContextTooLongError) as caught:
        await collect(provider, request())
    assert "maximum context length" in str(caught.value)
    assert caught.value.user_message == ContextTooLongError.user_message


# ----------------------------------------------------------------------------- the raw request path

# Everything the history can hold: images, text beside thinking, parallel calls, results, ünïcode.
RICH = ChatRequest(
    model="gpt-test", system="Be brief.", temperature=0.2, max_tokens=300,
    tools=(ToolSpec("get_weather", "Weather for a city.",
                    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
           ToolSpec("now", "The time.", {"type": "object", "properties": {}})),
    messages=(
        Message.user("what is this?", ImagePart("image/png", "iVBORw0KGgo=")),
        Message(Role.ASSISTANT, (ThinkingPart("hmm", signature="s"), TextPart("Let me check."), CALL,
                                 ToolCall("call_2", "now", "{}"))),
        Message(Role.TOOL, (ToolResult("call_1", "18C"), ToolResult("call_2", "boom", is_error=True),
                            TextPart("[user interrupted]"))),
        Message(Role.ASSISTANT, (ToolCall("call_3", "get_weather", '{"city": "Zürich"}'),)),
        Message(Role.TOOL, (ToolResult("call_3", "12C"),)),
        Message.assistant("It is 18C in Paris and 12C in Zürich."),
        Message.user('thanks, "quoted" and ünïcode \u2014 ok?'),
    ),
)

async def sdk_create(request: ChatRequest, llm: FakeLLM, body: dict[str, Any]) -> None:
    """The request as the official SDK's chat.completions.create sends it."""
    async with openai.AsyncOpenAI(api_key=KEY, base_url=llm.openai_base_url, max_retries=0) as client:
        stream = await client.chat.completions.create(**body)
        async with stream:
            async for _ in stream:
                pass


async def test_request_is_what_the_sdk_sends(provider: OpenAIProvider, llm: FakeLLM) -> None:
    body = provider._params(RICH)
    await sdk_create(RICH, llm, body)
    await collect(provider, RICH)
    via_sdk, ours = llm.requests
    assert ours.path == via_sdk.path == "/v1/chat/completions"
    assert ours.body == via_sdk.body == json.loads(json.dumps(body))
    for header in ("authorization", "content-type", "accept"):
        assert ours.headers[header] == via_sdk.headers[header], header
    assert ours.headers["user-agent"].startswith("chatgate/")


def test_the_chat_providers_never_import_the_sdk() -> None:
    """The SDK's import is most of a start's CPU (~900 modules): the chat providers do without it."""
    code = ("import sys, bot.providers.openai, bot.providers.openai_responses, bot.providers.wire; "
            "assert not [m for m in sys.modules if m == 'openai' or m.startswith(('openai.', 'httpx'))]")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_a_long_event_line_and_events_split_anywhere(provider: OpenAIProvider, llm: FakeLLM) -> None:
    """An SSE line far over aiohttp's line limit (a whole tool call's arguments) and chunks cut mid-line."""
    arguments = {"text": "x" * 300_000}
    llm.script(Reply.thinking("think", text="Long.", calls=(Call("note", arguments, id="call_1"),), chunk_size=400_000))
    _, done = await collect(provider, RICH)
    call = done.message.parts[-1]
    assert isinstance(call, ToolCall) and json.loads(call.arguments) == arguments


# ----------------------------------------------------------------------------- assembler quirks


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A chunk as the provider gets it: the parsed JSON of one SSE data line."""
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_calls_that_reuse_index_zero_with_new_ids_stay_apart() -> None:
    """Some servers number every parallel call 0; a new id means a new call."""
    a = _Assembler("m")
    a.feed(chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}))
    a.feed(chunk({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "g", "arguments": '{"x": 1}'}}]},
                 finish="tool_calls"))
    done = a.finish("openai")
    assert [(c.id, c.name, c.arguments) for c in done.message.tool_calls] == [("a", "f", "{}"), ("b", "g", '{"x": 1}')]


def test_stop_with_tool_calls_means_tool_use() -> None:
    a = _Assembler("m")
    a.feed(chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}, "stop"))
    assert a.finish("openai").stop_reason is StopReason.TOOL_USE


def test_stream_without_finish_reason_is_transient() -> None:
    a = _Assembler("m")
    a.feed(chunk({"content": "half an ans"}))
    with pytest.raises(TransientError, match="ended early"):
        a.finish("openai")


def test_unknown_finish_reason_is_unknown() -> None:
    a = _Assembler("m")
    a.feed(chunk({"content": "x"}, "something_new"))
    assert a.finish("openai").stop_reason is StopReason.UNKNOWN


@pytest.mark.parametrize("raw", [
    pytest.param([1, 2], id="not an object"),
    pytest.param({"choices": ["x"]}, id="choice not an object"),
    pytest.param({"choices": [{"index": 0, "delta": "text"}]}, id="delta not an object"),
    pytest.param({"choices": [{"index": 0, "delta": {"content": ["a", "b"]}}]}, id="content not a string"),
    pytest.param({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "a", "function": {"name": "f", "arguments": 5}}]}}]}, id="arguments not a string"),
    pytest.param({"choices": [], "usage": 12}, id="usage not an object"),
])
def test_malformed_chunks_raise_what_the_provider_calls_malformed(raw: Any) -> None:
    with pytest.raises(MALFORMED):
        _Assembler("m").feed(raw)


def test_usage_chunk_without_choices() -> None:
    a = _Assembler("m")
    a.feed(chunk({"content": "x"}, "stop"))
    a.feed({"id": "c", "model": "m-2024", "choices": [], "usage": {
        "prompt_tokens": 50, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 32}}})
    done = a.finish("openai")
    assert done.usage == Usage(50, 3, 32, 0) and done.model == "m-2024"


async def test_max_completion_tokens_for_api_openai_com() -> None:
    p = OpenAIProvider(api_key=KEY, base_url=None, timeout=1)
    try:
        params = p._params(ChatRequest(model="o4-mini", system="", messages=(Message.user("hi"),), max_tokens=99))
    finally:
        await p.aclose()
    assert params["max_completion_tokens"] == 99 and "max_tokens" not in params


@pytest.mark.parametrize(("model", "fixed"), [
    ("gpt-4o-mini", False), ("gpt-4.1", False), ("o1", True), ("o3-mini", True), ("o4-mini-2025-04-16", True),
    ("gpt-5", True), ("gpt-5-mini", True), ("gpt-5-chat-latest", False), ("llama3.1:8b", False),
])
def test_reasoning_models_get_no_temperature(model: str, fixed: bool) -> None:
    from bot.providers.openai import fixed_temperature

    assert fixed_temperature(model) is fixed


async def test_summary_temperature_is_sent_where_the_model_takes_one(provider: Any) -> None:
    hi = (Message.user("hi"),)
    assert provider._params(ChatRequest(model="gpt-4o", system="", messages=hi, temperature=0.3))["temperature"] == 0.3
    assert "temperature" not in provider._params(ChatRequest(model="o3", system="", messages=hi, temperature=0.3))


def test_the_proxy_is_the_environments_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.providers.wire import proxy_for

    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("https://api.openai.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.corp.example")
    assert proxy_for("https://api.openai.com/v1") == "http://proxy.internal:3128"
    assert proxy_for("https://llm.corp.example/v1") is None  # spared by NO_PROXY
    assert proxy_for("http://localhost:11434/v1") is None  # no HTTP_PROXY for plain http
