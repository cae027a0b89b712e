"""The Responses provider beyond the contract: the request it sends, reasoning items carried
within a turn, failures announced inside the stream, and the fake's events as the SDK types them."""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from bot.errors import ContextTooLongError, ProviderBusyError, ProviderRequestError
from bot.llm import ImagePart, Message, Role, TextPart, ThinkingPart, ToolCall, ToolResult
from bot.providers.base import ChatRequest, StopReason, ThinkingDelta, ToolSpec, complete
from bot.providers.failures import TransientError
from bot.providers.openai_responses import ResponsesProvider, _Assembler, request_params, to_responses_input
from bot.providers.retry import RetryPolicy
from tests.fakes import llm_responses
from tests.fakes.llm_server import Call, FakeLLM, Reply, Thought

FAST = RetryPolicy(max_retries=1, base_delay=0.01, max_delay=0.02)
TOOL = ToolSpec("lookup", "Look a thing up.", {"type": "object", "properties": {"q": {"type": "string"}}})


def provider(llm: FakeLLM, **kw: Any) -> ResponsesProvider:
    return ResponsesProvider(api_key="sk-test-0123456789abcdef", base_url=llm.openai_base_url, timeout=5,
                             policy=kw.pop("policy", FAST), **kw)


def test_the_request_has_the_responses_shape() -> None:
    request = ChatRequest("gpt-4.1", "Be terse.", (Message.user("hi", ImagePart("image/png", "AAAA")),), (TOOL,),
                          max_tokens=321, temperature=0.2, volatile="now: noon")
    params = request_params(request)
    assert params["instructions"] == "Be terse." and params["store"] is False and params["stream"] is True
    assert params["max_output_tokens"] == 321 and params["temperature"] == 0.2
    assert params["tools"] == [{"type": "function", "name": "lookup", "description": "Look a thing up.",
                                "parameters": TOOL.parameters, "strict": False}]
    content = params["input"][0]["content"]
    assert [c["type"] for c in content] == ["input_text", "input_image", "input_text"]
    assert content[1]["image_url"] == "data:image/png;base64,AAAA" and "now: noon" in content[2]["text"]
    assert "include" not in params and "reasoning" not in params  # gpt-4.1 refuses encrypted reasoning


@pytest.mark.parametrize(("model", "effort", "include", "reasoning"), [
    ("o4-mini", None, True, None),
    ("gpt-5", "high", True, {"effort": "high"}),
    ("my-local-model", "low", True, {"effort": "low"}),
    ("gpt-5-chat-latest", None, False, None),
])
def test_reasoning_models_ask_for_encrypted_reasoning(model: str, effort: str | None, include: bool,
                                                      reasoning: dict[str, str] | None) -> None:
    params = request_params(ChatRequest(model, "", (Message.user("q"),), temperature=0.5, reasoning_effort=effort))
    assert ("include" in params) is include and params.get("reasoning") == reasoning
    if include:
        assert params["include"] == ["reasoning.encrypted_content"]
    assert ("temperature" in params) is (model in ("my-local-model", "gpt-5-chat-latest"))


def test_reasoning_goes_back_only_within_its_turn_and_only_if_it_is_openais() -> None:
    earlier = ThinkingPart("old thought", item_id="rs_old", encrypted="enc-old")
    anthropics = ThinkingPart("claude thought", signature="sig")
    now = ThinkingPart("new thought", item_id="rs_new", encrypted="enc-new")
    no_content = ThinkingPart("", item_id="rs_bare")
    messages = (
        Message.user("first"),
        Message(Role.ASSISTANT, (earlier, TextPart("first answer"))),
        Message.user("second"),
        Message(Role.ASSISTANT, (anthropics, now, no_content, ToolCall("c1", "lookup", '{"q": "x"}'))),
        Message(Role.TOOL, (ToolResult("c1", "found"),)),
    )
    items = to_responses_input(messages)
    assert items == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second"},
        {"type": "reasoning", "id": "rs_new", "summary": [{"type": "summary_text", "text": "new thought"}],
         "encrypted_content": "enc-new"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "found"},
    ]


async def test_reasoning_items_come_back_with_their_encrypted_content(llm: FakeLLM) -> None:
    llm.script(Reply.thinking("let me see", signature="enc-1", calls=(Call("lookup", {"q": "x"}, id="c1"),)),
               Reply.text("it is x"))
    first = ChatRequest("o4-mini", "sys", (Message.user("what is x?"),), (TOOL,))
    async with provider(llm) as p:
        events = []
        async with aclosing(p.stream(first)) as stream:
            events = [e async for e in stream]
        done = events[-1]
        assert [e.text for e in events if isinstance(e, ThinkingDelta)] and done.stop_reason is StopReason.TOOL_USE
        thought = done.message.parts[0]
        assert isinstance(thought, ThinkingPart) and (thought.thinking, thought.encrypted) == ("let me see", "enc-1")
        follow = ChatRequest("o4-mini", "sys", (*first.messages, done.message,
                                                Message(Role.TOOL, (ToolResult("c1", "x is 42"),))), (TOOL,))
        final = await complete(p, follow)
    assert final.message.text == "it is x"
    sent = llm.requests[1].body
    assert sent["include"] == ["reasoning.encrypted_content"] and sent["store"] is False
    assert [i.get("type", "message") for i in sent["input"]] == ["message", "reasoning", "function_call",
                                                                 "function_call_output"]
    assert sent["input"][1]["encrypted_content"] == "enc-1" and sent["input"][1]["id"] == thought.item_id
    llm.assert_tool_pairing()


def test_a_flat_error_event_and_a_failed_response_are_typed() -> None:
    def fed(event: dict[str, Any]) -> BaseException:
        assembler = _Assembler("m", "openai-responses", "sk-secret-value")
        with pytest.raises((TransientError, ProviderRequestError)) as caught:
            assembler.feed(event)
        return caught.value

    busy = fed({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "sequence_number": 3})
    assert isinstance(busy, TransientError) and busy.status == 429
    failed = fed({"type": "response.failed", "response": {"status": "failed", "error": {
        "code": "server_error", "message": "oops sk-secret-value"}}})
    assert isinstance(failed, TransientError) and failed.status == 500 and "sk-secret-value" not in str(failed)
    overflow = fed({"type": "error", "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model."})
    assert isinstance(overflow, ContextTooLongError)
    refused = fed({"type": "response.failed", "response": {"error": {"code": "invalid_prompt", "message": "no"}}})
    assert type(refused) is ProviderRequestError


async def test_a_failed_response_before_any_output_is_retried_then_busy(llm: FakeLLM) -> None:
    llm.script(Reply.failed("server_error"), Reply.text("second try"))
    async with provider(llm) as p:
        done = await complete(p, ChatRequest("gpt-x", "", (Message.user("q"),)))
        assert done.message.text == "second try" and len(llm.requests) == 2
        llm.script(Reply.failed("rate_limit_exceeded"), Reply.failed("rate_limit_exceeded"))
        with pytest.raises(ProviderBusyError):
            await complete(p, ChatRequest("gpt-x", "", (Message.user("q"),)))


def test_an_incomplete_response_says_why() -> None:
    for reason, stop in (("max_output_tokens", StopReason.MAX_TOKENS), ("content_filter", StopReason.CONTENT_FILTER)):
        assembler = _Assembler("m", "openai-responses", None)
        assembler.feed({"type": "response.incomplete", "response": {"status": "incomplete",
                                                                    "incomplete_details": {"reason": reason}}})
        assert assembler.finish("openai-responses").stop_reason is stop


def test_the_fakes_events_are_what_the_sdk_types_accept() -> None:
    adapter = TypeAdapter(ResponseStreamEvent)
    frames = llm_responses.frames((Thought("hmm", "enc"),), "hello", (Call("f", {"a": 1}, id="c9"),), "completed",
                                  "gpt-x", llm_responses.usage_of(10, 3, 2, 1), 2)
    kinds = []
    for frame, _ in frames:
        data = json.loads(frame.split("data: ", 1)[1])
        kinds.append(type(adapter.validate_python(data)).__name__)
    assert kinds[0] == "ResponseCreatedEvent" and kinds[-1] == "ResponseCompletedEvent"
    assert {"ResponseReasoningSummaryTextDeltaEvent", "ResponseTextDeltaEvent",
            "ResponseFunctionCallArgumentsDeltaEvent", "ResponseOutputItemDoneEvent"} <= set(kinds)
    assert [json.loads(f.split("data: ", 1)[1])["sequence_number"] for f, _ in frames] == list(range(len(frames)))


async def test_the_sdks_own_responses_create_reads_the_fake(llm: FakeLLM) -> None:
    llm.script(Reply.tool_calls([Call("f", {"a": 1}, id="c7")], text="hi"), Reply.text("streamed"))
    async with openai.AsyncOpenAI(api_key="k", base_url=llm.openai_base_url, max_retries=0) as client:
        whole = await client.responses.create(model="gpt-x", input="q")
        assert whole.output_text == "hi" and whole.usage is not None
        assert [item.type for item in whole.output] == ["message", "function_call"]
        async with client.responses.stream(model="gpt-x", input="q") as stream:
            final = await stream.get_final_response()
    assert final.output_text == "streamed"
