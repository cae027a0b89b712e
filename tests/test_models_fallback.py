"""Fallbacks end to end: which errors move a run to ``agent.fallbacks``, only before anything
happened, the one note per chat, the next turn back on the conversation's model, and the
cost and traces of the model that answered; through the real SDKs and the fake LLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import App
from bot.errors import ContextTooLongError, ProviderAuthError, ProviderBusyError, ProviderUnavailableError
from bot.providers.base import Usage
from bot.providers.pricing import Price, billed
from bot.tracing import SpanKind
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import Call, FakeLLM, Reply, Tokens
from tests.test_models_switch import MODELS, OTHER, OWNER, make_config, msg, paths, say

FALLING = "model: smart, fallbacks: [fast]"
FAST_PRICE = Price(1.0, 2.0)
KEY = "agent:main:telegram:dm:1"


@pytest.mark.parametrize(("failure", "note"), [
    (Reply.error(429, retry_after=120), "Answered by fast: smart is rate-limited right now."),  # above the cap
    (Reply.error(529), "Answered by fast: smart is overloaded right now."),
    (Reply.error(503), "Answered by fast: smart is unavailable right now."),
])
async def test_busy_or_down_moves_to_the_fallback_with_a_note_first(tmp_path: Path, llm: FakeLLM, failure: Reply,
                                                                    note: str) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=FALLING), {"telegram": channel}):
        llm.script(failure, Reply.text("from fast"))
        await _send(channel, 2)
        assert channel.texts() == [note, "from fast"]  # a message of its own, before the answer
        assert paths(llm) == ["messages", "completions"]


@pytest.mark.parametrize(("failure", "sentence"), [
    (Reply.error(401), ProviderAuthError.user_message),
    (Reply.error(400, "context_length_exceeded"), ContextTooLongError.user_message),
])
async def test_a_bad_key_or_a_context_overflow_does_not_fall_back(tmp_path: Path, llm: FakeLLM, failure: Reply,
                                                                 sentence: str) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=FALLING), {"telegram": channel}):
        llm.script(failure)
        assert await say(channel, "hello") == sentence
        assert paths(llm) == ["messages"]


async def test_the_note_is_shown_once_and_the_next_turn_is_back_on_the_model(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=FALLING), {"telegram": channel}):
        llm.script(Reply.error(529), Reply.text("fast one"))
        await _send(channel, 2)
        llm.script(Reply.text("smart again"))
        assert await say(channel, "next") == "smart again"
        llm.script(Reply.error(529), Reply.text("fast two"))
        assert await say(channel, "and again") == "fast two"  # no second note in this chat
        assert paths(llm) == ["messages", "completions", "messages", "messages", "completions"]
        llm.script(Reply.error(529), Reply.text("fast for another chat"))
        before = len(channel.sent)
        await channel.inject(msg("hi", OTHER))
        await channel.wait_for_replies(before + 2)
        assert channel.texts()[-2:] == ["Answered by fast: smart is overloaded right now.", "fast for another chat"]


async def test_the_note_is_remembered_in_the_database_not_by_the_process(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm, agent=FALLING)
    first = RecordingChannel("telegram")
    async with App(config, {"telegram": first}) as app:
        llm.script(Reply.error(529), Reply.text("fast one"))
        await _send(first, 2)
        assert first.texts()[0] == "Answered by fast: smart is overloaded right now."
        assert await app.store.first_note(KEY, "fallback:fast", None, 0.0) is False  # recorded
    again = RecordingChannel("telegram")  # a restart (or another instance): the chat was told already
    async with App(config, {"telegram": again}):
        llm.script(Reply.error(529), Reply.text("fast two"))
        assert await say(again, "after the restart") == "fast two"
        assert again.texts() == ["fast two"]


async def test_cost_budget_traces_and_status_name_the_model_that_answered(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    untitled = MODELS + "  titles: null\n"  # a session's title, made in the background, would be on the bill too
    async with App(make_config(tmp_path, llm, agent=FALLING, models=untitled), {"telegram": channel}) as app:
        usage = Tokens(input=1000, output=100)
        llm.script(Reply.error(529), Reply.text("from fast", usage=usage))
        await _send(channel, 2)
        expected = billed(FAST_PRICE, Usage(1000, 100))
        [trace] = await app.store.traces(KEY)
        assert (trace.model, trace.why) == ("fast-model", "fallback fast for smart: overloaded right now")
        assert [(s.kind, s.name, s.is_error) for s in trace.spans] == [
            (SpanKind.LLM, "smart-model", True), (SpanKind.LLM, "fast-model", False)]
        assert trace.cost == pytest.approx(expected)
        session = await app.store.session(KEY)
        assert (await app.store.usage(session)).cost == pytest.approx(expected)
        assert (await app.store.usage_since(f"telegram:{OWNER}", 0))[1] == pytest.approx(expected)  # the budget's
        status = await say(channel, "/status")
        assert "Model: smart (smart-model), the default" in status
        assert "Last answer: fast-model (fallback fast for smart: overloaded right now)" in status


async def test_no_fallback_after_a_tool_ran(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=FALLING), {"telegram": channel}):
        llm.script(Reply.tool_calls([Call("list_files", {"path": "."}, id="t1")]), Reply.error(529))
        assert await say(channel, "look around") == ProviderBusyError.user_message
        assert paths(llm) == ["messages", "messages"]


async def test_no_fallback_after_text_was_streamed(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=FALLING), {"telegram": channel}):
        llm.script(Reply.text("a long answer that breaks off", chunk_size=2, cut_after=3))
        assert await say(channel, "tell me") == ProviderUnavailableError.user_message
        assert paths(llm) == ["messages"]


@pytest.mark.parametrize(("on_choice", "expected"), [
    ("", [ProviderBusyError.user_message]),
    (", fallback_on_choice: true", ["Answered by fast: smart is overloaded right now.", "from fast"]),
])
async def test_a_model_picked_with_model_falls_back_only_with_fallback_on_choice(
        tmp_path: Path, llm: FakeLLM, on_choice: str, expected: list[str]) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent=FALLING + on_choice), {"telegram": channel}):
        await say(channel, "/model smart")
        llm.script(Reply.error(529), Reply.text("from fast"))
        before = len(channel.sent)
        await _send(channel, before + len(expected))
        assert channel.texts()[before:] == expected


async def _send(channel: RecordingChannel, replies: int, text: str = "hello") -> None:
    await channel.inject(msg(text))
    await channel.wait_for_replies(replies)
