"""A named model on OpenAI's Responses API (``api: responses``), end to end: text, a tool round
trip with its reasoning item passed back within the turn (and not in the next one), and /stop
closing the stream; through the app, the real SDK and the fake LLM."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bot.app import App
from bot.llm import ThinkingPart
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import Call, FakeLLM, Reply, without_context
from tests.test_models_switch import make_config, msg, say

DEEP = "model: deep"


def kinds(body: dict[str, object]) -> list[str]:
    return [item.get("type", "message") for item in body["input"]]  # type: ignore[attr-defined, union-attr]


async def test_text_goes_through_the_responses_api(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=DEEP), {"telegram": channel}) as app:
        assert await say(channel, "hello there") == "echo: hello there"
        [sent] = llm.requests
        body = sent.body
        assert sent.path == "/v1/responses" and body["model"] == "deep-model"
        assert body["reasoning"] == {"effort": "high"} and body["include"] == ["reasoning.encrypted_content"]
        assert body["store"] is False and body["stream"] is True and "chatgate" in body["instructions"].lower()
        assert without_context(body["input"][-1]["content"]) == "hello there"
        assert {t["name"] for t in body["tools"]} >= {"read_file", "list_files"}
        [trace] = await app.store.traces("agent:main:telegram:dm:1")
        assert (trace.model, trace.why, trace.input_tokens > 0) == ("deep-model", "default deep", True)


async def test_a_tool_round_trip_carries_the_reasoning_item_within_the_turn(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=DEEP), {"telegram": channel}) as app:
        llm.script(Reply.thinking("I should list the files", signature="enc-42",
                                  calls=(Call("list_files", {"path": "."}, id="c1"),)),
                   Reply.text("There are a few files."))
        assert await say(channel, "what is in my workspace?") == "There are a few files."
        follow = llm.requests[1].body
        assert kinds(follow)[-4:] == ["message", "reasoning", "function_call", "function_call_output"]
        reasoning = follow["input"][-3]
        assert reasoning["encrypted_content"] == "enc-42" and reasoning["id"].startswith("rs_")
        assert reasoning["summary"] == [{"type": "summary_text", "text": "I should list the files"}]
        assert follow["input"][-1]["call_id"] == "c1" and "AGENTS.md" in follow["input"][-1]["output"]
        llm.assert_tool_pairing()
        await say(channel, "thanks")
        assert "reasoning" not in kinds(llm.requests[2].body)  # an earlier turn's reasoning stays out
        session = await app.store.session("agent:main:telegram:dm:1")
        stored = [p for m in await app.store.history(session) for p in m.parts if isinstance(p, ThinkingPart)]
        assert [(p.item_id, p.encrypted) for p in stored] == [(reasoning["id"], "enc-42")]


async def test_stop_closes_the_responses_stream(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=DEEP), {"telegram": channel}) as app:
        channel.watch(app.events)
        llm.script(Reply.text("x" * 400, chunk_size=1, delay=0.02))
        await channel.inject(msg("write a lot"))
        await channel.wait_for_event("delta")
        started = time.monotonic()
        await channel.inject(msg("/stop"))
        await asyncio.wait_for(llm.requests[0].disconnected.wait(), 1.0)
        assert time.monotonic() - started < 1.0
        await channel.wait_for_replies(1)
        assert channel.texts() == ["Stopped."] and not llm.requests[0].finished.is_set()
