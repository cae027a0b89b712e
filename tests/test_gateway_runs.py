"""Runs, queues, /stop, access and delivery through the gateway, the real SDK and the fake LLM."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.app import App
from bot.channels import SendFailed, Target
from bot.messages import ChatType, InboundMessage, Sender
from bot.settings import Config, load_config
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import Call, FakeLLM, Reply, without_context
from tests.procs import all_dead, marker, pids_running


def group_msg(text: str, user: str = "u1", chat: str = "-100", *, addressed: bool = True,
              platform: str = "telegram", message_id: str | None = None) -> InboundMessage:
    return InboundMessage(platform, "bot", chat, ChatType.GROUP, Sender(user, f"User {user}"), text,
                          message_id or f"g{time.monotonic_ns()}", addressed=addressed)


def tg_dm(text: str, user: str = "42") -> InboundMessage:
    return dm(text, user, platform="telegram")


AppFactory = Callable[..., "AsyncIterator[tuple[App, RecordingChannel]]"]


def config(tmp_path: Path, llm: FakeLLM, extra: str = "") -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}", max_retries: 3}}}}
storage: {{path: "{tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
tools: {{exec: {{enabled: true}}}}
{extra}
""")
    return load_config(path, env={})


class Running:
    def __init__(self, tmp_path: Path, llm: FakeLLM) -> None:
        self.tmp_path, self.llm = tmp_path, llm
        self.stack: list[App] = []

    async def start(self, extra: str = "", platform: str = "telegram") -> tuple[App, RecordingChannel]:
        channel = RecordingChannel(platform)
        app = App(config(self.tmp_path, self.llm, extra), {platform: channel})
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


OPEN = "channels: {telegram: {dm_policy: open, group_policy: open}}"


def user_texts(llm: FakeLLM, index: int) -> list[str]:
    return [without_context(m["content"]) for m in llm.requests[index].body["messages"] if m["role"] == "user"]


# -- queue modes ------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "expected"), [
    ("followup", [["busy"], ["busy", "one", "two"], ["busy", "one", "two", "three"]]),
    ("collect", [["busy"], ["busy", "one\n\ntwo\n\nthree"]]),
])
async def test_messages_that_arrive_while_busy(running: Running, llm: FakeLLM, mode: str,
                                               expected: list[list[str]]) -> None:
    _, channel = await running.start(OPEN + f"\nruns: {{queue_mode: {mode}, debounce_ms: 50}}")
    llm.script(Reply.text("slow", delay=0.05))
    await channel.inject(tg_dm("busy"))
    await llm.wait_for_requests(1)
    for text in ("one", "two", "three"):
        await channel.inject(tg_dm(text))
    await channel.wait_for_replies(len(expected))
    await asyncio.sleep(0.3)
    got = [[t for t in user_texts(llm, i)] for i in range(len(llm.requests))]
    if mode == "followup":  # each its own turn: the history shows the earlier ones
        assert [g[-1] for g in got] == ["busy", "one", "two", "three"]
        assert len(channel.sent) == 4
    else:
        assert got == expected and len(channel.sent) == 2


async def test_interrupt_stops_the_run_and_answers_the_new_message(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN + "\nruns: {queue_mode: interrupt, debounce_ms: 0}")
    llm.script(Reply.hang())
    await channel.inject(tg_dm("first"))
    await llm.wait_for_requests(1)
    await channel.inject(tg_dm("actually, this"))
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 1)
    (reply,) = await channel.wait_for_replies(1)
    assert reply.text == "echo: actually, this"


async def test_the_21st_queued_message_gets_a_visible_refusal(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN + "\nruns: {max_queued: 2, queue_mode: followup}")
    llm.script(Reply.hang())
    await channel.inject(tg_dm("busy"))
    await llm.wait_for_requests(1)
    for text in ("q1", "q2", "q3"):
        await channel.inject(tg_dm(text))
    (reply,) = await channel.wait_for_replies(1)
    assert reply.text.startswith("I'm still busy, your message was not queued")


async def test_group_context_reaches_the_model_when_addressed(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN)
    await channel.inject(group_msg("lunch at noon?", user="a", addressed=False))
    await channel.inject(group_msg("sure, the usual place", user="b", addressed=False))
    await asyncio.sleep(0.05)
    assert not llm.requests  # unaddressed: kept, not run
    await channel.inject(group_msg("@bot what did we decide?", user="c"))
    await channel.wait_for_replies(1)
    (text,) = user_texts(llm, 0)
    assert text.index("lunch at noon?") < text.index("the usual place") < text.index("what did we decide")


async def test_stored_group_context_is_pruned_after_its_retention(running: Running, llm: FakeLLM,
                                                                  tmp_path: Path) -> None:
    import sqlite3

    cfg = config(tmp_path, llm, OPEN)
    retention = cfg.storage.retention.model_copy(update={"context": 0.00001})  # 0.864 s
    cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"retention": retention})})
    channel = RecordingChannel("telegram")
    app = App(cfg, {"telegram": channel})
    await app.__aenter__()
    running.stack.append(app)
    await channel.inject(group_msg("chatter nobody addressed", user="a", addressed=False))
    await asyncio.sleep(0.05)
    rows = sqlite3.connect(tmp_path / "chatgate.db").execute("SELECT context, payload FROM inbound").fetchall()
    assert rows and rows[0][0] == 1 and "chatter" in rows[0][1]
    await asyncio.sleep(1.0)  # past the retention (0.864 s)
    await app.__aexit__(None, None, None)
    running.stack.remove(app)
    again = App(cfg, {"telegram": RecordingChannel("telegram")})
    await again.__aenter__()  # pruned as it starts, then every hour
    running.stack.append(again)
    await asyncio.sleep(0.1)
    assert sqlite3.connect(tmp_path / "chatgate.db").execute("SELECT COUNT(*) FROM inbound").fetchone() == (0,)


async def test_no_cross_session_leak(running: Running, llm: FakeLLM, tmp_path: Path) -> None:
    _, channel = await running.start(OPEN)
    llm.script(Reply.tool_calls([Call("write_file", {"path": "secret.txt", "content": "ann's"}, id="c1")]),
               Reply.text("saved"))
    await channel.inject(tg_dm("save my secret", user="ann"))
    await channel.wait_for_replies(1)
    await channel.inject(tg_dm("save my secret", user="bob"))
    await channel.wait_for_replies(2)
    assert user_texts(llm, 2) == ["save my secret"]  # bob's request has none of ann's history
    dirs = sorted(p.name for p in (tmp_path / "workspaces").iterdir() if p.is_dir())
    assert dirs == ["telegram-ann", "telegram-bob"]
    assert (tmp_path / "workspaces" / "telegram-ann" / "secret.txt").exists()
    assert not (tmp_path / "workspaces" / "telegram-bob" / "secret.txt").exists()


# -- /stop everywhere ---------------------------------------------------------------------


async def stop_and_check(channel: RecordingChannel, llm: FakeLLM, *, request: int = 0) -> float:
    started = time.monotonic()
    await channel.inject(tg_dm("/stop"))
    replies = await channel.wait_for_replies(1)
    assert replies[-1].text.startswith("Stopped.")
    return time.monotonic() - started


async def test_stop_while_waiting_for_the_first_token(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN)
    llm.script(Reply.hang())
    await channel.inject(tg_dm("hello"))
    await llm.wait_for_requests(1)
    assert await stop_and_check(channel, llm) < 1
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 1)


async def test_stop_while_streaming(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN)
    llm.script(Reply.text("word " * 200, delay=0.02))
    await channel.inject(tg_dm("hello"))
    await channel.wait_for_event("delta")
    await stop_and_check(channel, llm)
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 1)
    await asyncio.sleep(0.2)
    assert [r.text for r in channel.sent] == ["Stopped."]  # no late answer


OWNER = "channels: {telegram: {dm_policy: open, group_policy: open, owners: ['42']}}"  # exec is for owners


async def test_stop_kills_a_running_subprocess(running: Running, llm: FakeLLM, tmp_path: Path) -> None:
    _, channel = await running.start(OWNER)
    child, detached = marker(), marker()  # the sandbox's pids mean nothing out here: find them by name
    command = f"sleep {child} & setsid sleep {detached} & wait"
    llm.script(Reply.tool_calls([Call("exec", {"command": command}, id="c1")]))
    await channel.inject(tg_dm("run it"))
    await pids_running(child, detached)
    await stop_and_check(channel, llm)
    assert await all_dead(child, detached)
    history_request = await _next_request(channel, llm)
    assert "Tool execution cancelled by user" in history_request


async def test_stop_during_three_parallel_tools(running: Running, llm: FakeLLM, tmp_path: Path) -> None:
    _, channel = await running.start(OWNER)
    marks = [marker() for _ in range(3)]
    llm.script(Reply.tool_calls([Call("exec", {"command": f"sleep {m} & wait"}, id=f"c{i}")
                                 for i, m in enumerate(marks)]))
    await channel.inject(tg_dm("run three"))
    await pids_running(*marks)
    await stop_and_check(channel, llm)
    assert await all_dead(*marks)
    text = await _next_request(channel, llm)
    assert text.count("Tool execution cancelled by user") == 3


async def test_stop_during_a_retry_back_off(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN)
    llm.script(Reply.error(429, retry_after=30))
    await channel.inject(tg_dm("hello"))
    await channel.wait_for_event("run.retrying")
    assert await stop_and_check(channel, llm) < 1
    assert len(llm.requests) == 1  # the retry never happened


async def test_stop_a_run_queued_behind_the_global_cap(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN + "\nruns: {max_concurrent: 1}")
    llm.script(Reply.hang())
    await channel.inject(tg_dm("hog", user="other"))
    await llm.wait_for_requests(1)
    await channel.inject(tg_dm("waiting"))
    await channel.wait_for_event("activity", "queued")  # shown as queued
    await stop_and_check(channel, llm)
    assert len(llm.requests) == 1


async def test_stop_with_nothing_running_and_the_queue_dropped(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN + "\nruns: {queue_mode: followup}")
    await channel.inject(tg_dm("/stop"))
    await channel.wait_for_replies(1)
    assert channel.texts() == ["Nothing is running."]
    llm.script(Reply.hang())
    await channel.inject(tg_dm("one"))
    await llm.wait_for_requests(1)
    await channel.inject(tg_dm("two"))
    await channel.inject(tg_dm("/stop"))
    await channel.wait_for_replies(2)
    assert channel.texts()[-1] == "Stopped. 1 waiting message dropped."
    await asyncio.sleep(0.1)
    assert len(llm.requests) == 1


async def _next_request(channel: RecordingChannel, llm: FakeLLM) -> str:
    """Send another message; the request it makes must carry a valid history."""
    before = len(llm.requests)
    await channel.inject(tg_dm("and now?"))
    await llm.wait_for_requests(before + 1, timeout=5)
    llm.assert_tool_pairing()
    return json.dumps(llm.requests[-1].body["messages"])


# -- commands -----------------------------------------------------------------------------


async def test_status_whoami_help(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN)
    await channel.inject(tg_dm("hello"))
    await channel.wait_for_replies(1)
    for command in ("/status", "/whoami", "/help"):
        await channel.inject(tg_dm(command))
    await channel.wait_for_replies(4)
    status, whoami, help_text = channel.texts()[1:]
    assert "Model: fake-model" in status and "1 turns" in status and "idle" in status
    assert whoami == "Your telegram id is 42 (this DM)."
    assert "/stop" in help_text and "/new" in help_text


async def test_stopall_is_for_owners(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start("channels: {telegram: {dm_policy: open, group_policy: open, owners: [900]}}")
    llm.script(Reply.hang(), Reply.hang())
    await channel.inject(group_msg("@bot one", user="1"))
    await channel.inject(InboundMessage("telegram", "bot", "-100", ChatType.GROUP, Sender("2", "B"), "@bot two",
                                        "t2", thread_id="7"))
    await llm.wait_for_requests(2)
    await channel.inject(group_msg("/stopall", user="1"))
    await asyncio.sleep(0.05)
    assert channel.sent == []  # not an owner, in a group: no reply at all
    await channel.inject(group_msg("/stopall", user="900"))
    (reply,) = await channel.wait_for_replies(1)
    assert reply.text == "Stopped 2 runs."


async def test_command_for_another_bot_is_not_a_command(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start(OPEN)
    await channel.inject(tg_dm("/stop@otherbot"))
    (reply,) = await channel.wait_for_replies(1)
    assert reply.text == "echo: /stop@otherbot"  # an ordinary message for the model


# -- access -----------------------------------------------------------------------------------


async def test_allowlist_refuses_strangers_once_per_hour(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start("channels: {telegram: {allow_from: [42]}}")
    await channel.inject(tg_dm("hi", user="42"))
    await channel.wait_for_replies(1)
    await channel.inject(tg_dm("hi", user="666"))
    await channel.inject(tg_dm("hello??", user="666"))
    await asyncio.sleep(0.05)
    texts = channel.texts()
    assert texts[0] == "echo: hi" and len(texts) == 2 and "666" in texts[1]
    assert len(llm.requests) == 1


async def test_groups_need_an_allowlist_entry_and_a_mention(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start("channels: {telegram: {groups: ['-100']}}")
    await channel.inject(group_msg("@bot hi", chat="-999"))  # not allowed: silence
    await channel.inject(group_msg("chatter", chat="-100", addressed=False))  # no mention: context
    await channel.inject(group_msg("@bot hi", chat="-100"))
    (reply,) = await channel.wait_for_replies(1)
    assert "chatter" in reply.text and len(llm.requests) == 1


async def test_pairing_flow(running: Running, llm: FakeLLM) -> None:
    app, channel = await running.start("channels: {telegram: {dm_policy: pairing}}")
    await channel.inject(tg_dm("hi", user="77"))
    (reply,) = await channel.wait_for_replies(1)
    code = reply.text.split("chatgate pairing approve ")[1].split()[0]
    assert len(code) == 8 and not set(code) & set("01OI")
    assert not llm.requests
    assert await app.store.approve_pairing(code, time.time()) is not None  # what `chatgate pairing approve` does
    await channel.inject(tg_dm("hi again", user="77"))
    await channel.wait_for_replies(2)
    assert channel.texts()[-1] == "echo: hi again"


# -- delivery -------------------------------------------------------------------------------


class FlakyChannel(RecordingChannel):
    """Fails the first attempt of every send, as a platform timing out would."""

    def __init__(self, platform: str) -> None:
        super().__init__(platform)
        self.attempts = 0

    async def send(self, to: Target, text: str) -> str:
        self.attempts += 1
        if self.attempts % 2 == 1:
            raise SendFailed("platform timed out")
        return await super().send(to, text)


async def test_a_failed_send_is_retried_and_delivered_once(tmp_path: Path, llm: FakeLLM) -> None:
    channel = FlakyChannel("telegram")
    async with App(config(tmp_path, llm, OPEN), {"telegram": channel}):
        await channel.inject(tg_dm("hello"))
        await channel.wait_for_replies(1)
        assert channel.attempts == 2
    again = RecordingChannel("telegram")
    async with App(config(tmp_path, llm, OPEN), {"telegram": again}):  # a restart owes nothing
        await asyncio.sleep(0.3)
    assert channel.texts() == ["echo: hello"] and again.sent == [] and len(llm.requests) == 1
