"""/model end to end: listing, switching, buttons, who may switch, persistence, /status, titles
and ``chatgate sessions``; through the intake, the real SDKs and the fake LLM.

The platforms' buttons are the channels' own (``Asks``); here a channel that keeps its
questions in memory (``tests.test_approvals.AskingChannel``) stands in for them.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App
from bot.cli import main
from bot.messages import ChatType, InboundMessage, Sender
from bot.settings import Config, load_config
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FAKE_TITLE, FakeLLM, Reply
from tests.test_approvals import AskingChannel

OWNER, OTHER, FRIEND = "1", "2", "7"
_ids = itertools.count(1)
MODELS = """models:
  fast: {provider: openai, model: fast-model, pricing: {input: 1.0, output: 2.0}}
  smart: {provider: anthropic, model: smart-model, context_window: 200000, pricing: {input: 10.0, output: 20.0}}
  deep: {provider: openai, api: responses, model: deep-model, reasoning_effort: high, allowed: ["telegram:7"]}
"""


def write_config(tmp_path: Path, llm: FakeLLM, *, agent: str = "model: fast", models: str = MODELS,
                 extra: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
agent: {{{agent}}}
providers:
  openai: {{api_key: test-key, base_url: "{llm.openai_base_url}", max_retries: 0, timeout: 10}}
  anthropic: {{api_key: test-key, base_url: "{llm.anthropic_base_url}", max_retries: 0, timeout: 10}}
{models}
storage: {{path: "{tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
runs: {{debounce_ms: 0}}
channels: {{telegram: {{dm_policy: open, group_policy: open, owners: ["{OWNER}"]}}}}
{extra}
""")
    return path


def make_config(tmp_path: Path, llm: FakeLLM, **kw: str) -> Config:
    return load_config(write_config(tmp_path, llm, **kw), env={})


def msg(text: str, user: str = OWNER, *, chat: str | None = None, reply_to: str | None = None) -> InboundMessage:
    """A Telegram message: a DM of ``user``, or in group ``chat``."""
    chat_type = ChatType.DM if chat is None else ChatType.GROUP
    return InboundMessage("telegram", "bot", chat or user, chat_type, Sender(user, f"User {user}"), text,
                          f"m{next(_ids)}", reply_to=reply_to)


def paths(llm: FakeLLM) -> list[str]:
    return [r.path.rsplit("/", 1)[-1] for r in llm.requests]


def models_of(llm: FakeLLM) -> list[str]:
    return [r.body["model"] for r in llm.requests]


async def say(channel: RecordingChannel, text: str, user: str = OWNER, **kw: str) -> str:
    before = len(channel.sent)
    await channel.inject(msg(text, user, **kw))
    await channel.wait_for_replies(before + 1)
    return channel.texts()[-1]


@pytest.fixture
async def running(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm), {"telegram": channel}) as app:
        yield app, channel


async def test_model_lists_the_models_and_picks_one_kept_across_restart_compaction_and_new(
        tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm, agent="model: fast, compaction: {keep_last: 2}")
    channel = RecordingChannel("telegram")
    async with App(config, {"telegram": channel}):
        shown = await say(channel, "/model")
        assert shown.startswith("Model: fast (fast-model), the default")
        assert "Models: default (fast), smart, deep." in shown and "/model <name>" in shown
        await say(channel, "remember: blue")
        assert (await say(channel, "/model smart")).startswith("Model for this chat: smart (smart-model).")
        await say(channel, "what did I say?")
        assert paths(llm) == ["completions", "messages"] and models_of(llm)[-1] == "smart-model"
        assert "remember: blue" in str(llm.requests[-1].body["messages"])  # the history is kept
    channel = RecordingChannel("telegram")
    async with App(config, {"telegram": channel}) as app:  # a restart
        assert (await say(channel, "/model")).startswith("Model: smart (smart-model), picked with /model")
        llm.script(Reply.text("NO_REPLY"), Reply.text("They said blue."))  # the memory flush, then the summary
        assert (await say(channel, "/compact")).startswith("Compacted")
        assert paths(llm)[-2:] == ["messages", "messages"]  # the conversation's model summarises it
        await say(channel, "/new")
        await say(channel, "and now?")
        assert models_of(llm)[-1] == "smart-model"
        assert (await say(channel, "/model default")) == "Back to the default model: fast."
        await say(channel, "and now?")
        assert models_of(llm)[-1] == "fast-model"
        session = await app.store.session("agent:main:telegram:dm:1")
        assert await app.store.chosen_model(session.key) is None


async def test_without_named_models_model_says_so(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, agent="model: plain-model", models=""), {"telegram": channel}):
        assert await say(channel, "/model") == "Model: plain-model, the default\nNo other models are configured."
        assert (await say(channel, "/model fast")).startswith('There is no model "fast"')


async def test_buttons_pick_the_model_and_a_press_by_someone_else_changes_nothing(tmp_path: Path,
                                                                                 llm: FakeLLM) -> None:
    channel = AskingChannel()
    channel.name = channel.platform = "telegram"
    async with App(make_config(tmp_path, llm), {"telegram": channel}):
        await channel.inject(msg("/model", chat="g1"))
        question = await channel.question()
        assert [(c.id, c.label) for c in question.choices] == [
            ("model:default", "default · fast-model"), ("model:smart", "smart · smart-model"),
            ("model:deep", "deep · deep-model")]
        assert question.text.startswith("Model: fast (fast-model), the default")

        async def press(label: str, user: str) -> None:
            choice = next(c for c in question.choices if c.label.startswith(label))
            await channel.inject(msg(choice.id, user, chat="g1", reply_to=question.id))

        await press("smart", OTHER)  # not an owner: a private answer, nothing changes
        await channel.wait(lambda: len(channel.press_answers) == 1)
        assert channel.press_answers == [(OTHER, "Only an owner can change the model here.")]
        assert question.closed is None
        await press("smart", OWNER)
        await channel.wait(lambda: question.closed is not None)
        assert question.closed == ("Model for this chat: smart (smart-model). /model default goes back to fast."
                                   " (by User 1)")
        assert channel.press_answers[-1] == (OWNER, None)
        await channel.inject(msg("hello", OTHER, chat="g1"))
        await channel.wait_for_replies(1)
        assert models_of(llm) == ["smart-model"]  # the group's conversation uses it, whoever writes
        assert len(channel.texts()) == 1 and channel.texts()[0].endswith("│ hello")  # presses reached no model


async def test_who_may_switch_owners_people_a_model_allows_and_everyone(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm), {"telegram": channel}):
        assert await say(channel, "/model smart", OTHER) == "Only an owner can change the model here."
        assert await say(channel, "/model", OTHER) == ("Model: fast (fast-model), the default\n"
                                                       "Only an owner can change it.")
        assert (await say(channel, "/model deep", FRIEND)).startswith("Model for this chat: deep")  # deep allows 7
        assert await say(channel, "/model smart", FRIEND) == "Only an owner can change the model here."
        assert "Models: default (fast), deep." in await say(channel, "/model", FRIEND)
        before = len(channel.sent)
        await channel.inject(msg("/model smart", OTHER, chat="g1"))  # refused in a group: no reply at all
        await channel.inject(msg("/model smart", OWNER, chat="g1"))
        await channel.wait_for_replies(before + 1)
        assert channel.texts()[before:] == ["Model for this chat: smart (smart-model). /model default goes back "
                                            "to fast."]
    channel = RecordingChannel("telegram")
    everyone = MODELS + "  switch: everyone\n"
    async with App(make_config(tmp_path, llm, models=everyone), {"telegram": channel}):
        assert (await say(channel, "/model smart", OTHER)).startswith("Model for this chat: smart")
        assert await say(channel, "/model deep", OTHER) == "Only an owner can change the model here."


async def test_in_a_group_only_an_owner_moves_everyone_onto_a_model(tmp_path: Path, llm: FakeLLM) -> None:
    """Issue 32: a member a model allows (or everyone, with switch: everyone) may pick it in their
    DM, never for a group whose members would all be charged at its price."""
    channel = RecordingChannel("telegram")
    everyone = MODELS + "  switch: everyone\n"
    async with App(make_config(tmp_path, llm, models=everyone), {"telegram": channel}):
        before = len(channel.sent)
        await channel.inject(msg("/model deep", FRIEND, chat="g1"))  # deep allows FRIEND: not in a group
        await channel.inject(msg("/model smart", OTHER, chat="g1"))  # switch: everyone: not in a group
        await channel.inject(msg("/model", OTHER, chat="g1"))
        await channel.wait_for_replies(before + 1)
        assert channel.texts()[before:] == ["Model: fast (fast-model), the default\nOnly an owner can change it."]
        await channel.inject(msg("hello", OTHER, chat="g1"))
        await channel.wait_for_replies(before + 2)
        assert models_of(llm)[-1] == "fast-model"
        assert (await say(channel, "/model deep", FRIEND)).startswith("Model for this chat: deep")  # their DM


async def test_status_shows_the_model_why_and_the_title(running: tuple[App, RecordingChannel], llm: FakeLLM) -> None:
    _, channel = running
    await say(channel, "hello")
    await asyncio.wait_for(_until(lambda: llm.title_requests), 5)
    await say(channel, "/model smart")
    status = await say(channel, "/status")
    assert status.startswith("Model: smart (smart-model), picked with /model\nContext: ")
    assert "of 200,000 tokens" in status  # the picked model's window
    assert "Last answer: fast-model (default fast)" in status and f"Title: {FAKE_TITLE}" in status


async def test_a_title_is_made_once_in_the_background_and_listed(tmp_path: Path, llm: FakeLLM,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, llm)
    channel = RecordingChannel("telegram")
    async with App(load_config(path, env={}), {"telegram": channel}) as app:
        await say(channel, "plan a trip to Lisbon")
        await say(channel, "and Porto?")
        await asyncio.wait_for(_until(lambda: llm.title_requests), 5)
        await asyncio.sleep(0.1)
        assert len(llm.title_requests) == 1 and llm.title_requests[0].body["model"] == "fast-model"
        assert "plan a trip to Lisbon" in str(llm.title_requests[0].body["messages"])
        session = await app.store.session("agent:main:telegram:dm:1")
        await asyncio.wait_for(_until_async(lambda: app.store.title(session)), 5)
        assert await app.store.title(session) == FAKE_TITLE
        assert (await app.store.usage(session)).turns == 2  # the title's call costs, but is no turn
        traces = await app.store.traces(session.key)
        assert [t.status for t in traces].count("title") == 1
        charged, _ = await app.store.usage_since(f"telegram:{OWNER}", 0)  # the title is charged like any call
        assert charged == sum(t.input_tokens + t.output_tokens for t in traces)
    assert await asyncio.to_thread(main, ["sessions", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "agent:main:telegram:dm:1" in out and FAKE_TITLE in out


async def test_titles_by_a_named_model_and_off_with_null(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, models=MODELS + "  titles: smart\n"), {"telegram": channel}):
        await say(channel, "hello")
        await asyncio.wait_for(_until(lambda: llm.title_requests), 5)
        assert llm.title_requests[0].path == "/v1/messages" and llm.title_requests[0].body["model"] == "smart-model"
    llm.title_requests.clear()
    channel = RecordingChannel("telegram")
    async with App(make_config(tmp_path, llm, models=MODELS + "  titles: null\n"), {"telegram": channel}):
        await say(channel, "hello", OTHER)
        await asyncio.sleep(0.3)
        assert llm.title_requests == []


async def test_a_title_never_delays_the_answer_and_its_failure_is_ignored(tmp_path: Path) -> None:
    async with FakeLLM(titles="script") as llm:
        channel = RecordingChannel("telegram")
        async with App(make_config(tmp_path, llm), {"telegram": channel}) as app:
            llm.script(Reply.text("first answer"), Reply.hang())  # the title's call never answers
            assert await say(channel, "hello") == "first answer"
            await llm.wait_for_requests(2)
            llm.script(Reply.text("second answer"))
            assert await say(channel, "more") == "second answer"  # the session goes on meanwhile
        channel = RecordingChannel("telegram")
        async with App(make_config(tmp_path, llm), {"telegram": channel}) as app:
            llm.script(Reply.text("answer"), Reply.error(500))
            assert await say(channel, "hello", OTHER) == "answer"
            await llm.wait_for_requests(4)
            await asyncio.sleep(0.2)
            session = await app.store.session("agent:main:telegram:dm:2")
            assert await app.store.title(session) is None
            assert [t.status for t in await app.store.traces(session.key)] == ["completed", "failed"]


async def _until(predicate) -> None:  # type: ignore[no-untyped-def]
    while not predicate():
        await asyncio.sleep(0.01)


async def _until_async(get) -> None:  # type: ignore[no-untyped-def]
    while not await get():
        await asyncio.sleep(0.01)


async def test_a_sub_agent_runs_on_its_parent_conversations_model(running: tuple[App, RecordingChannel],
                                                                  llm: FakeLLM) -> None:
    from tests.fakes.llm_server import Call

    _, channel = running
    await say(channel, "/model smart")
    llm.script(Reply.tool_calls([Call("spawn", {"task": "look around"}, id="s1")]), Reply.text("child done"),
               Reply.text("parent done"))
    assert await say(channel, "delegate it") == "parent done"
    assert models_of(llm) == ["smart-model"] * 3
