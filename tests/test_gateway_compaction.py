"""/compact, /status and /stop around compaction, through the gateway, the real SDK and the fake LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.compaction import SUMMARY_HEADER
from bot.app import App
from bot.settings import load_config
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeLLM, Reply
from tests.test_gateway_runs import OPEN, tg_dm

KEY = "agent:main:telegram:dm:42"
SMALL = 6


class Running:
    def __init__(self, tmp_path: Path, llm: FakeLLM) -> None:
        self.tmp_path, self.llm = tmp_path, llm
        self.stack: list[App] = []

    async def start(self, trigger_messages: int, extra: str = "") -> tuple[App, RecordingChannel]:
        path = self.tmp_path / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model, compaction: {{trigger_messages: {trigger_messages}, keep_last: 2}}}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}", max_retries: 0}}}}
storage: {{path: "{self.tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp_path / 'workspaces'}"}}
{OPEN}
{extra}
""")
        channel = RecordingChannel("telegram")
        app = App(load_config(path, env={}), {"telegram": channel})
        channel.watch(app.events)
        await app.__aenter__()
        self.stack.append(app)
        return app, channel


@pytest.fixture
async def running(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Running]:
    r = Running(tmp_path, llm)
    yield r
    for app in reversed(r.stack):
        await app.__aexit__(None, None, None)


async def chat(channel: RecordingChannel, llm: FakeLLM, *texts: str) -> None:
    for text in texts:
        before = len(channel.texts())
        await channel.inject(tg_dm(text))
        await channel.wait_for_replies(before + 1)


async def test_compact_summarises_and_status_shows_it(running: Running, llm: FakeLLM) -> None:
    app, channel = await running.start(100)
    await chat(channel, llm, "one", "two", "three")
    llm.script(Reply.text("NO_REPLY"), Reply.text("They said one, two and three."))  # flush, then the summary
    await chat(channel, llm, "/compact")
    assert channel.texts()[-1].startswith("Compacted 4 messages into a summary")
    await chat(channel, llm, "/status")
    status = channel.texts()[-1]
    assert "Last compaction:" in status and "Context:" in status
    await chat(channel, llm, "four")
    assert SUMMARY_HEADER in str(llm.requests[-1].body["messages"])
    session = await app.store.session(KEY)
    assert (await app.store.summary(session)).text == "They said one, two and three."  # type: ignore[union-attr]


async def test_compaction_after_a_run_keeps_the_answer_first(running: Running, llm: FakeLLM) -> None:
    app, channel = await running.start(SMALL)
    await chat(channel, llm, "one", "two", "three")  # 6 live messages: not past 6 yet
    llm.script(Reply.text("answer four"), Reply.text("NO_REPLY"), Reply.text("summary of it all"))
    await chat(channel, llm, "four")
    assert channel.texts()[-1] == "answer four"
    session = await app.store.session(KEY)
    for _ in range(100):
        if await app.store.summary(session) is not None:
            break
        await asyncio.sleep(0.02)
    assert (await app.store.summary(session)).text == "summary of it all"  # type: ignore[union-attr]
    assert await app.store.live_count(session) == 2


async def test_stop_during_a_compaction_cancels_it(running: Running, llm: FakeLLM) -> None:
    app, channel = await running.start(100)
    await chat(channel, llm, "one", "two", "three")
    session = await app.store.session(KEY)
    before = await app.store.history(session)
    llm.script(Reply.text("NO_REPLY"), Reply.hang())  # the summary never comes
    sent = len(llm.requests)
    await channel.inject(tg_dm("/compact"))
    await llm.wait_for_requests(sent + 2, timeout=5)
    await chat(channel, llm, "/stop")
    assert channel.texts()[-1] == "Stopped."
    await asyncio.wait_for(llm.requests[-1].disconnected.wait(), 5)  # the summary's stream was closed
    assert await app.store.history(session) == before and await app.store.summary(session) is None
    llm.script(Reply.text("NO_REPLY"), Reply.text("fresh summary"))
    await chat(channel, llm, "/compact")  # the try-lock was released
    assert channel.texts()[-1].startswith("Compacted")


async def test_the_next_message_does_not_wait_for_a_compaction_and_stop_cancels_it(running: Running,
                                                                                   llm: FakeLLM) -> None:
    app, channel = await running.start(SMALL)
    await chat(channel, llm, "one", "two", "three")
    session = await app.store.session(KEY)
    llm.script(Reply.text("answer four"), Reply.text("NO_REPLY"), Reply.hang())  # the summary never comes
    sent = len(llm.requests)
    await chat(channel, llm, "four")
    await llm.wait_for_requests(sent + 3, timeout=5)  # the answer, the memory flush, the hanging summary
    llm.script(Reply.text("answer five"))
    await chat(channel, llm, "five")  # answered while the compaction still waits for its summary
    assert channel.texts()[-1] == "answer five"
    await chat(channel, llm, "/stop")
    assert channel.texts()[-1] == "Stopped."
    await asyncio.wait_for(llm.requests[sent + 2].disconnected.wait(), 5)  # the summary's stream was closed
    assert await app.store.summary(session) is None and await app.store.live_count(session) == 10


# -- issue 19: the flush gets exactly the run's tool policy; compaction traces are scrubbed

def tool_names(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [t["function"]["name"] for t in request.body.get("tools", [])]


async def test_the_flush_gets_exactly_the_runs_tool_policy(running: Running, llm: FakeLLM) -> None:
    app, channel = await running.start(100, "tools: {deny: [edit_file, memory_*]}")
    await chat(channel, llm, "one", "two", "three")
    llm.script(Reply.text("NO_REPLY"), Reply.text("a summary"))
    await chat(channel, llm, "/compact")
    flush = llm.requests[-2]
    assert "write_file" in tool_names(flush) and "edit_file" not in tool_names(flush)
    assert not any(name.startswith("memory_") for name in tool_names(flush))


async def test_a_read_only_deployment_gets_no_flush(running: Running, llm: FakeLLM) -> None:
    app, channel = await running.start(100, "tools: {deny: [write_file, edit_file]}")
    await chat(channel, llm, "one", "two", "three")
    before = len(llm.requests)
    llm.script(Reply.text("a summary"))
    await chat(channel, llm, "/compact")
    assert channel.texts()[-1].startswith("Compacted")
    assert len(llm.requests) == before + 1 and not tool_names(llm.requests[-1])  # the summary alone
    assert not (running.tmp_path / "workspaces" / "telegram-42" / "memory").exists()


async def test_compaction_traces_are_scrubbed_of_the_configured_secrets(running: Running, llm: FakeLLM) -> None:
    app, channel = await running.start(100)
    await chat(channel, llm, "one", "two", "three")
    llm.script(Reply.text("I saw the key test-key in there"), Reply.text("the key was test-key"))
    await chat(channel, llm, "/compact")
    traces = await app.store.traces(KEY)
    previews = [span.preview for t in traces for span in t.spans]
    assert any("I saw the key *** in there" in p for p in previews)
    assert not any("test-key" in p for p in previews)
