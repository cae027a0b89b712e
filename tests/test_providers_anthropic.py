"""Anthropic-only behaviour: Messages wire format, thinking blocks passed back verbatim."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from bot.errors import ContextTooLongError, ProviderUnavailableError
from bot.llm import ImagePart, Message, Role, TextPart, ThinkingPart, ToolCall, ToolResult
from bot.providers.anthropic import AnthropicProvider, _Assembler, request_params, to_anthropic_messages
from bot.providers.base import ChatRequest, StopReason, TextDelta, ThinkingDelta, ToolCallDelta, ToolSpec, Usage
from bot.providers.streaming import MALFORMED
from tests.fakes.llm_server import Call, FakeLLM, Reply, Tokens
from tests.test_providers_contract import FAST, KEY, collect, request

SIGNATURE = "EqQBCkYIBxgCKkD+signature/with+base64==" * 3


@pytest.fixture
async def provider(llm: FakeLLM) -> Any:
    async with AnthropicProvider(api_key=KEY, base_url=llm.anthropic_base_url, timeout=5, policy=FAST) as p:
        yield p


@pytest.mark.parametrize(("messages", "wire"), [
    pytest.param((Message.user("hi"),), [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                 id="user text"),
    pytest.param(
        (Message.user("what is this?", ImagePart("image/jpeg", "/9j/4AAQ")),),
        [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}}]}],
        id="image as base64 block"),
    pytest.param(
        (Message(Role.ASSISTANT, (TextPart("Checking."), ThinkingPart("why", signature="sig"),
                                  ToolCall("toolu_1", "f", '{"a": [1, 2]}'),
                                  ThinkingPart("", redacted_data="opaque"))),),
        [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "why", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1, 2]}}]}],
        id="thinking first, then text and tool_use"),
    pytest.param(
        (Message(Role.ASSISTANT, (ThinkingPart("from another model"), TextPart("hi"))),),
        [{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}],
        id="unsigned thinking dropped"),
    pytest.param(
        (Message(Role.ASSISTANT, (ToolCall("toolu_1", "f", '{"a": tru'), ToolCall("toolu_2", "g", "[1]"))),),
        [{"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}]}],
        id="unreadable arguments become {}"),
    pytest.param(
        (Message(Role.TOOL, (ToolResult("toolu_1", "18C"), ToolResult("toolu_2", "boom", is_error=True),
                             ToolResult("toolu_3", ""))),
         Message.user("thanks")),
        [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False, "content": "18C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True, "content": "boom"},
            {"type": "tool_result", "tool_use_id": "toolu_3", "is_error": False},
            {"type": "text", "text": "thanks"}]}],
        id="tool results as a user turn, merged with the next user turn"),
    pytest.param((Message.user(""), Message.assistant("")), [], id="empty messages skipped"),
])
def test_messages_to_wire(messages: tuple[Message, ...], wire: list[dict[str, Any]]) -> None:
    assert to_anthropic_messages(messages) == wire


def test_params_system_tools_temperature() -> None:
    tool = ToolSpec("f", "Does f.", {"type": "object"})
    params = request_params(ChatRequest(model="claude-x", system="Be brief.", messages=(Message.user("hi"),),
                                        tools=(tool,), temperature=0.3, max_tokens=500))
    assert params["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert params["max_tokens"] == 500 and params["temperature"] == 0.3
    assert params["tools"] == [{"name": "f", "description": "Does f.", "input_schema": {"type": "object"}}]
    assert "thinking" not in params
    assert "system" not in request_params(ChatRequest(model="m", system="", messages=()))


@pytest.mark.parametrize(("effort", "max_tokens", "sent_budget", "sent_max"), [
    ("low", 8192, 1024, 8192),  # the API's minimum budget
    ("medium", 8192, 4096, 8192),
    ("medium", 4096, 4096, 8192),  # room for the answer after thinking
    ("high", 1000, 16_384, 17_384),
])
def test_thinking_budget(effort: str, max_tokens: int, sent_budget: int, sent_max: int) -> None:
    params = request_params(ChatRequest(model="m", system="", messages=(Message.user("hi"),), temperature=0.5,
                                        max_tokens=max_tokens, reasoning_effort=effort))
    assert params["thinking"] == {"type": "enabled", "budget_tokens": sent_budget}
    assert params["max_tokens"] == sent_max and "temperature" not in params


async def test_headers_and_path(provider: AnthropicProvider, llm: FakeLLM) -> None:
    await collect(provider, request())
    sent = llm.requests[0]
    assert sent.path == "/v1/messages"
    # anthropic 2.x sends the key as a Bearer token; older SDKs used x-api-key
    assert f"Bearer {KEY}" == sent.headers.get("authorization") or sent.headers.get("x-api-key") == KEY
    assert sent.headers["anthropic-version"]
    assert sent.body["stream"] is True and sent.body["system"][0]["text"] == "You are terse."


async def test_thinking_blocks_round_trip_verbatim(provider: AnthropicProvider, llm: FakeLLM) -> None:
    llm.script(
        Reply.thinking("I should look this up.\nCarefully: ünïcode, \"quotes\".", signature=SIGNATURE,
                       redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4a", calls=(Call("lookup", {"q": "x"}, id="toolu_9"),),
                       chunk_size=3),
        Reply.text("The answer is 4."),
    )
    first = ChatRequest(model="claude-test", system="", messages=(Message.user("2+2?"),), reasoning_effort="low")
    events, done = await collect(provider, first)
    thought = "I should look this up.\nCarefully: ünïcode, \"quotes\"."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == thought
    assert done.message.parts == (
        ThinkingPart(thought, signature=SIGNATURE),
        ThinkingPart("", redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
        ToolCall("toolu_9", "lookup", '{"q": "x"}'),
    )
    assert done.stop_reason is StopReason.TOOL_USE
    assert llm.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}

    follow_up = ChatRequest(model="claude-test", system="", reasoning_effort="low", messages=(
        *first.messages, done.message, Message(Role.TOOL, (ToolResult("toolu_9", "x = 4"),))))
    _, final = await collect(provider, follow_up)
    assert final.message.text == "The answer is 4."
    assert llm.requests[1].body["messages"][1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": thought, "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "x"}},
    ]}
    assert llm.requests[1].body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "is_error": False, "content": "x = 4",
         "cache_control": {"type": "ephemeral"}}]}  # the turn goes on: its tail is a breakpoint
    llm.assert_tool_pairing()


async def test_tool_call_without_input_has_empty_object_arguments(provider: AnthropicProvider,
                                                                  llm: FakeLLM) -> None:
    llm.script(Reply.tool_calls([Call("now", "")]))
    _, done = await collect(provider, request())
    assert done.message.tool_calls[0].arguments == "{}"


async def test_prompt_too_long_is_context_error(provider: AnthropicProvider, llm: FakeLLM) -> None:
    llm.script(Reply.error(400, "context_length_exceeded"))
    with pytest.raises(ContextTooLongError, match="prompt is too long"):
        await collect(provider, request())


async def test_overloaded_error_event_mid_stream_is_not_retried(provider: AnthropicProvider, llm: FakeLLM) -> None:
    llm.script(Reply.text("some text then overload", error_after=1))
    with pytest.raises(ProviderUnavailableError, match="529 overloaded"):
        await collect(provider, request())
    assert len(llm.requests) == 1


# ----------------------------------------------------------------------------- the raw request path

RICH = ChatRequest(
    model="claude-test", system="Be brief.", reasoning_effort="low", max_tokens=1000,
    tools=(ToolSpec("lookup", "Look a thing up.",
                    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),),
    messages=(
        Message.user("what is this?", ImagePart("image/jpeg", "/9j/4AAQ")),
        Message(Role.ASSISTANT, (ThinkingPart("Let me see.\nünïcode", signature=SIGNATURE),
                                 ThinkingPart("", redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
                                 TextPart("Checking."), ToolCall("toolu_1", "lookup", '{"q": "x"}'))),
        Message(Role.TOOL, (ToolResult("toolu_1", "x = 4"), ToolResult("toolu_2", "", is_error=True))),
        Message.user('and "quoted" text \u2014 thanks'),
        Message(Role.ASSISTANT, (ThinkingPart("unsigned, from another model"), TextPart("You're welcome."))),
        Message.user("one more"),
    ),
)

async def sdk_create(request: ChatRequest, llm: FakeLLM) -> None:
    """The request as the official SDK's messages.create sends it."""
    async with anthropic.AsyncAnthropic(api_key=KEY, base_url=llm.anthropic_base_url, max_retries=0) as client:
        stream = await client.messages.create(**request_params(request))
        async with stream:
            async for _ in stream:
                pass


async def test_request_is_what_the_sdk_sends(provider: AnthropicProvider, llm: FakeLLM) -> None:
    await sdk_create(RICH, llm)
    await collect(provider, RICH)
    via_sdk, ours = llm.requests
    assert ours.path == via_sdk.path == "/v1/messages"
    assert ours.body == via_sdk.body == json.loads(json.dumps(request_params(RICH)))
    for header in ("authorization", "anthropic-version", "content-type", "accept"):
        assert ours.headers[header] == via_sdk.headers[header], header


async def test_temperature_is_sent_as_given(provider: AnthropicProvider, llm: FakeLLM) -> None:
    """messages.create of anthropic 2.x has no temperature argument; the raw path sends the field."""
    await collect(provider, request(temperature=0.3))
    assert llm.requests[0].body["temperature"] == 0.3


async def test_pings_and_a_whole_turn_read_from_the_wire(provider: AnthropicProvider, llm: FakeLLM) -> None:
    llm.script(Reply.thinking("think", signature=SIGNATURE, redacted_data="opaque", text="Checking.",
                              calls=(Call("lookup", {"q": "y"}, id="toolu_9"),),
                              usage=Tokens(1200, 34, cache_read=800, cache_write=100)))
    _, done = await collect(provider, RICH)
    assert done.message.parts == (ThinkingPart("think", signature=SIGNATURE), ThinkingPart("", redacted_data="opaque"),
                                  TextPart("Checking."), ToolCall("toolu_9", "lookup", '{"q": "y"}'))
    assert done.usage == Usage(1200, 34, 800, 100) and done.stop_reason is StopReason.TOOL_USE


# ----------------------------------------------------------------------------- assembler on dict events


def feed_all(*events: dict[str, Any]) -> tuple[list[Any], _Assembler]:
    a = _Assembler("m")
    return [item for event in events for item in a.feed(event)], a


def test_events_with_content_in_their_start_blocks() -> None:
    """Blocks may arrive whole in content_block_start (text, thinking with its signature, tool input)."""
    events, a = feed_all(
        {"type": "message_start", "message": {"model": "claude-x", "usage": {
            "input_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 0, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "t", "signature": "s1"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s2"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "hi"}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "server_tool_use", "id": "s"}},
        {"type": "content_block_start", "index": 3,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}},
        {"type": "some_future_event"},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    )
    assert events == [ThinkingDelta("t"), TextDelta("hi"), ToolCallDelta(0, "toolu_1", "f", "")]
    done = a.finish("anthropic")
    assert done.message.parts == (ThinkingPart("t", signature="s1s2"), TextPart("hi"),
                                  ToolCall("toolu_1", "f", '{"a": 1}'))
    assert done.usage == Usage(15, 9, 5, 0) and done.model == "claude-x"


@pytest.mark.parametrize("event", [
    pytest.param(["message_start"], id="not an object"),
    pytest.param({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
                 id="delta for a block that never started"),
    pytest.param({"type": "content_block_start", "index": 0}, id="start without its block"),
    pytest.param({"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking"}},
                 id="redacted thinking without data"),
    pytest.param({"type": "message_start", "message": "m"}, id="message not an object"),
])
def test_malformed_events_raise_what_the_provider_calls_malformed(event: Any) -> None:
    with pytest.raises(MALFORMED):
        _Assembler("m").feed(event)


def test_non_string_delta_is_malformed() -> None:
    a = _Assembler("m")
    a.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    with pytest.raises(TypeError, match="text_delta text is int"):
        a.feed({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}})
