"""The first agent turn end to end: recording channel -> gateway -> real SDK -> fake LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App
from bot.settings import Config, load_config
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import FakeLLM, Reply, without_context


def make_config(tmp_path: Path, llm: FakeLLM, provider: str) -> Config:
    base_url = llm.openai_base_url if provider == "openai" else llm.anthropic_base_url
    path = tmp_path / "config.yaml"
    path.write_text(f"""
agent: {{provider: {provider}, model: fake-model}}
providers:
  {provider}: {{api_key: test-key, base_url: "{base_url}", max_retries: 2, timeout: 10}}
storage: {{path: "{tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
""")
    return load_config(path, env={})


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def app(tmp_path: Path, llm: FakeLLM, provider: str) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    app = App(make_config(tmp_path, llm, provider), {"test": channel})
    channel.watch(app.events)
    async with app as running:
        yield running, channel


def user_texts(llm: FakeLLM, index: int) -> list[str]:
    """The texts of user messages in request ``index``, whatever the dialect."""
    texts = []
    for m in llm.requests[index].body["messages"]:
        if m["role"] != "user":
            continue
        content = m["content"]
        if isinstance(content, str):
            texts.append(without_context(content))
        else:
            texts.extend(text for block in content if block.get("type") == "text"
                         if (text := without_context(block["text"])))
    return texts


async def test_answers_and_remembers(app: tuple[App, RecordingChannel], llm: FakeLLM) -> None:
    _, channel = app
    await channel.inject(dm("hello"))
    await channel.wait_for_replies(1)
    await channel.inject(dm("again"))
    await channel.wait_for_replies(2)
    assert channel.texts() == ["echo: hello", "echo: again"]
    assert user_texts(llm, 1) == ["hello", "again"]  # the first exchange came from the store
    assert "echo: hello" in str(llm.requests[1].body["messages"])
    assert channel.sent[0].reply_to == channel.sent[0].reply_to  # replies carry the trigger id
    assert channel.events[0].kind.value == "run.started"


async def test_history_survives_a_restart(tmp_path: Path, llm: FakeLLM, provider: str) -> None:
    config = make_config(tmp_path, llm, provider)
    for text in ("first", "second"):
        channel = RecordingChannel()
        async with App(config, {"test": channel}):
            await channel.inject(dm(text))
            await channel.wait_for_replies(1)
    assert user_texts(llm, 1) == ["first", "second"]


async def test_redelivered_message_runs_once(app: tuple[App, RecordingChannel], llm: FakeLLM) -> None:
    _, channel = app
    msg = dm("only once", message_id="tg-77")
    await channel.inject(msg)
    await channel.inject(msg)
    await channel.wait_for_replies(1)
    await asyncio.sleep(0.2)
    assert channel.texts() == ["echo: only once"]
    assert len(llm.requests) == 1


async def test_stop_closes_the_stream_and_keeps_history_valid(app: tuple[App, RecordingChannel],
                                                              llm: FakeLLM) -> None:
    _, channel = app
    llm.script(Reply.text("a long answer " * 50, delay=0.05))
    await channel.inject(dm("tell me a story"))
    await channel.wait_for_event("delta")  # the answer is streaming
    await channel.inject(dm("/stop"))
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 1.0)
    await channel.wait_for_replies(1)
    assert channel.texts() == ["Stopped."]
    await channel.inject(dm("next"))
    await channel.wait_for_replies(2)
    assert channel.texts()[-1] == "echo: next"
    assert user_texts(llm, 1) == ["tell me a story", "next"]
    assert "'a lo" in str(llm.requests[1].body["messages"])  # the partial answer was kept


async def test_stop_with_nothing_running(app: tuple[App, RecordingChannel]) -> None:
    _, channel = app
    await channel.inject(dm("/stop"))
    await channel.wait_for_replies(1)
    assert channel.texts() == ["Nothing is running."]


async def test_new_starts_a_fresh_session(app: tuple[App, RecordingChannel], llm: FakeLLM) -> None:
    running, channel = app
    await channel.inject(dm("remember me"))
    await channel.wait_for_replies(1)
    await channel.inject(dm("/new"))
    await channel.inject(dm("who am I"))
    await channel.wait_for_replies(3)
    assert user_texts(llm, 1) == ["who am I"]
    old = await running.store.history(await running.store.session(running.intake.conversation(dm("x")).session_key))
    assert len(old) == 2  # the fresh session has the new turn; the old one is kept in the store


async def test_provider_refusal_is_one_sentence(app: tuple[App, RecordingChannel], llm: FakeLLM) -> None:
    _, channel = app
    llm.script(Reply.error(401))
    await channel.inject(dm("hi"))
    (reply,) = await channel.wait_for_replies(1)
    assert "API key" in reply.text and "\n" not in reply.text and "Traceback" not in reply.text


async def test_sessions_run_concurrently_and_a_busy_session_waits(app: tuple[App, RecordingChannel],
                                                                 llm: FakeLLM) -> None:
    _, channel = app
    llm.script(Reply.text("slow for alice", delay=0.05), Reply.text("quick for bob"))
    await channel.inject(dm("a1", user="alice"))
    await llm.wait_for_requests(1)
    await channel.inject(dm("b1", user="bob"))
    await channel.inject(dm("a2", user="alice"))  # waits for alice's first run
    await channel.wait_for_replies(3)
    assert channel.texts()[0] == "quick for bob"  # bob did not wait behind alice
    assert channel.texts()[1:] == ["slow for alice", "echo: a2"]
    assert user_texts(llm, 2) == ["a1", "a2"]  # alice's history, not bob's
