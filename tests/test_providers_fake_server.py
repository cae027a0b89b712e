"""The fake LLM server itself: shapes the real SDKs accept, the pairing check, standalone mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from bot.llm import Message
from bot.providers.base import ChatRequest, complete
from bot.providers.openai import OpenAIProvider
from tests.fakes.llm_server import Call, FakeLLM, Reply, Tokens, tool_pairing_problems

ROOT = Path(__file__).resolve().parents[1]


async def test_non_streamed_openai_reply_parses(llm: FakeLLM) -> None:
    llm.script(Reply.tool_calls([Call("f", {"a": 1}, id="call_7")], text="hi", usage=Tokens(30, 4, 10)))
    async with openai.AsyncOpenAI(api_key="k", base_url=llm.openai_base_url, max_retries=0) as client:
        result = await client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "q"}])
    message = result.choices[0].message
    assert message.content == "hi" and result.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls is not None and message.tool_calls[0].id == "call_7"
    assert json.loads(message.tool_calls[0].function.arguments) == {"a": 1}  # type: ignore[union-attr]
    assert result.usage is not None and (result.usage.prompt_tokens, result.usage.completion_tokens) == (30, 4)
    assert result.usage.prompt_tokens_details.cached_tokens == 10  # type: ignore[union-attr]


async def test_non_streamed_anthropic_reply_parses(llm: FakeLLM) -> None:
    llm.script(Reply.thinking("hmm", signature="sig", text="4", calls=(Call("f", {"a": 1}, id="toolu_7"),)))
    async with anthropic.AsyncAnthropic(api_key="k", base_url=llm.anthropic_base_url, max_retries=0) as client:
        result = await client.messages.create(model="claude-x", max_tokens=10,
                                              messages=[{"role": "user", "content": "q"}])
    assert [b.type for b in result.content] == ["thinking", "text", "tool_use"]
    assert result.content[0].signature == "sig"  # type: ignore[union-attr]
    assert result.content[2].input == {"a": 1}  # type: ignore[union-attr]
    assert result.stop_reason == "tool_use"


async def test_requests_are_recorded_and_finished(llm: FakeLLM) -> None:
    async with OpenAIProvider(api_key="k", base_url=llm.openai_base_url, timeout=5) as p:
        done = await complete(p, ChatRequest(model="m", system="", messages=(Message.user("hey"),)))
    assert done.message.text == "echo: hey"
    sent = llm.requests[0]
    assert sent.path == "/v1/chat/completions" and sent.dialect == "openai"
    assert sent.body["messages"] == [{"role": "user", "content": "hey"}]
    assert sent.finished.is_set() and not sent.disconnected.is_set()


async def test_wait_for_requests_times_out(llm: FakeLLM) -> None:
    with pytest.raises(TimeoutError):
        await llm.wait_for_requests(1, timeout=0.05)


def call(id: str) -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(("messages", "problems"), [
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
      {"role": "tool", "tool_call_id": "a", "content": "1"}, {"role": "tool", "tool_call_id": "b", "content": "2"},
      {"role": "assistant", "content": "done"}], []),
    ([{"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
      {"role": "tool", "tool_call_id": "a", "content": "1"}, {"role": "user", "content": "next"}],
     ["message 2: tool call 'b' has no result"]),
    ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "z", "content": "1"}],
     ["message 1: tool result 'z' follows no call with that id"]),
    ([{"role": "assistant", "content": None, "tool_calls": [call("a")]}], ["end: tool call 'a' has no result"]),
])
def test_openai_pairing(messages: list[dict[str, Any]], problems: list[str]) -> None:
    assert tool_pairing_problems("openai", {"messages": messages}) == problems


def use(id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "f", "input": {}}


def result(id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id, "content": "ok"}


@pytest.mark.parametrize(("messages", "problems"), [
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [use("a"), use("b")]},
      {"role": "user", "content": [result("a"), result("b"), {"type": "text", "text": "more"}]}], []),
    ([{"role": "assistant", "content": [use("a")]}, {"role": "user", "content": [{"type": "text", "text": "x"},
                                                                                  result("a")]}],
     ["message 1: tool_result blocks must come first"]),
    ([{"role": "assistant", "content": [use("a"), use("b")]}, {"role": "user", "content": [result("b")]}],
     ["message 1: tool call 'a' has no result"]),
    ([{"role": "assistant", "content": [use("a")]}, {"role": "assistant", "content": "hm"},
      {"role": "user", "content": [result("a")]}],
     ["message 1: tool call 'a' has no result", "message 2: tool result 'a' follows no call with that id"]),
])
def test_anthropic_pairing(messages: list[dict[str, Any]], problems: list[str]) -> None:
    assert tool_pairing_problems("anthropic", {"messages": messages}) == problems


async def test_standalone_server_prints_its_url_and_echoes() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.llm_server", "--port", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        async with OpenAIProvider(api_key="k", base_url=base_url + "/v1", timeout=5) as p:
            done = await complete(p, ChatRequest(model="m", system="", messages=(Message.user("yo"),)))
        assert done.message.text == "echo: yo"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
