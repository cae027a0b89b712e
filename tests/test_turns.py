"""Intake and the turn runner (issue 20): a session waits in its own lane, never in a shared
slot; /stop never waits; a turn can start with no inbound message; inbound work is bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App
from bot.conversation import Conversation
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender
from bot.runs import TaskOrder
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import FakeLLM, Reply
from tests.test_gateway_runs import config

OPEN = "channels: {telegram: {dm_policy: open, group_policy: open}}"


class SlowFiles(RecordingChannel):
    """A channel whose file downloads take ``delay`` seconds (Slack allows 120 s, Discord 300 s)."""

    def __init__(self, delay: float) -> None:
        super().__init__("telegram")
        self.delay = delay

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        await asyncio.sleep(self.delay)
        return b"a big file"


@pytest.fixture
async def started(tmp_path: Path, llm: FakeLLM) -> AsyncIterator:  # type: ignore[type-arg]
    apps: list[App] = []

    async def start(channel: RecordingChannel, extra: str = "") -> App:
        app = App(config(tmp_path, llm, f"{OPEN}\n{extra}"), {"telegram": channel})
        channel.watch(app.events)
        await app.__aenter__()
        apps.append(app)
        return app

    yield start
    for app in reversed(apps):
        await app.__aexit__(None, None, None)


def with_file(text: str, user: str) -> InboundMessage:
    doc = Attachment(AttachmentKind.DOCUMENT, "big.zip", "application/zip", 10, platform_file_id="F1")
    return InboundMessage("telegram", "bot", user, ChatType.DM, Sender(user, "Slow"), text, f"f{user}",
                          attachments=(doc,))


async def test_a_slow_download_holds_only_its_own_session(started, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    channel = SlowFiles(delay=10.0)
    await started(channel, "runs: {queue_mode: followup, debounce_ms: 0}\nlimits: {messages_per_minute: null}")
    await channel.inject(with_file("here is my file", "1"))
    for i in range(50):
        await channel.inject(dm(f"and then {i}", "1", platform="telegram"))
    began = time.monotonic()
    llm.script(Reply.hang())  # the other person's question starts a run that streams nothing
    await channel.inject(dm("a question", "2", platform="telegram"))
    await llm.wait_for_requests(1, timeout=1.0)
    await channel.inject(dm("/stop", "2", platform="telegram"))
    (stopped,) = await channel.wait_for_replies(1, timeout=1.0)
    assert stopped.text == "Stopped." and stopped.chat_id == "2"
    assert time.monotonic() - began < 1.0
    await channel.inject(dm("another question", "2", platform="telegram"))
    await channel.wait_for_replies(2, timeout=1.0)
    assert channel.sent[1].text == "echo: another question" and time.monotonic() - began < 1.5
    assert all(s.chat_id == "2" for s in channel.sent)  # person 1 is still waiting for the download


async def test_a_turn_with_no_inbound_message_runs_commits_and_is_delivered_once(  # type: ignore[no-untyped-def]
        started, llm: FakeLLM) -> None:
    channel = RecordingChannel("telegram")
    app = await started(channel)
    conversation = Conversation.of_key("agent:main:telegram:dm:42")
    llm.script(Reply.text("Time to stretch!"))
    assert await app.turns.run_task(conversation, "Remind me to stretch.", TaskOrder()) == "completed"
    (sent,) = await channel.wait_for_replies(1)
    assert sent.text == "Time to stretch!" and sent.chat_id == "42" and sent.reply_to is None
    assert llm.requests[0].body["messages"][-1]["content"].startswith("Remind me to stretch.")
    history = await app.store.history(await app.store.session(conversation.session_key))
    assert [m.text for m in history] == ["Remind me to stretch.", "Time to stretch!"]
    assert await app.store.undelivered() == []
    await asyncio.sleep(0.3)
    assert len(channel.sent) == 1


async def test_inbound_work_is_bounded_and_the_channel_waits(started, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    channel = SlowFiles(delay=0.5)
    app = await started(channel, "limits: {messages_per_minute: null}")
    app.intake._room = asyncio.Semaphore(3)  # a small bound, for the test
    for user in ("1", "2", "3"):  # three downloads being decided: the bound is reached
        await channel.inject(with_file("file", user))
    blocked = asyncio.create_task(channel.inject(dm("one more", "4", platform="telegram")))
    await asyncio.sleep(0.2)
    assert not blocked.done()  # the channel is held: it stops taking more
    await asyncio.wait_for(blocked, 2.0)  # room again once a download is decided
    await channel.wait_for_replies(4, timeout=5.0)


async def test_stop_is_confirmed_before_the_stopped_draft_settles(started, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    class Streaming(RecordingChannel):
        streaming = "edit"

        def __init__(self) -> None:
            super().__init__("telegram")
            self.log: list[tuple[str, float, str]] = []

        async def send(self, to, text):  # type: ignore[no-untyped-def]
            self.log.append(("send", time.monotonic(), text))
            return await super().send(to, text)

        async def edit(self, to, message_id, text):  # type: ignore[no-untyped-def]
            self.log.append(("edit", time.monotonic(), text))
            await super().edit(to, message_id, text)

    channel = Streaming()
    await started(channel)
    llm.script(Reply.text("word " * 400, chunk_size=5, delay=0.01))
    await channel.inject(dm("write an essay", "42", platform="telegram"))
    await channel.wait_for_replies(1)  # the draft is out
    await asyncio.sleep(0.3)
    asked = time.monotonic()
    await channel.inject(dm("/stop", "42", platform="telegram"))
    await channel.wait_for_replies(2, timeout=2.0)
    confirmed = next(t for kind, t, text in channel.log if kind == "send" and text == "Stopped.")
    assert confirmed - asked < 0.5  # the bench measures it properly (python -m bench --only stop)
    await asyncio.sleep(channel.shape.edit_every + 0.5)
    edits = [t for kind, t, _ in channel.log if kind in ("send", "edit") and _ != "Stopped."]
    assert all(b - a >= channel.shape.edit_every - 0.05 for a, b in zip(edits, edits[1:]))  # the interval kept


async def test_a_message_stored_while_recovery_reads_is_decided_once(  # type: ignore[no-untyped-def]
        started, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """A channel hands over a message as the bot starts; it is stored just before recovery reads
    what is unanswered, and the channel's call resumes only after recovery took its list: one
    of the two decides it, never both (it used to be answered twice)."""
    from bot.store.sqlite import SQLiteStore

    recovered, resume = asyncio.Event(), asyncio.Event()
    real_record, real_unanswered = SQLiteStore.record_inbound, SQLiteStore.unanswered

    async def record(self, msg, key):  # type: ignore[no-untyped-def]
        inbound_id = await real_record(self, msg, key)
        if msg.text == "sent as the bot starts":
            await resume.wait()  # stored; the channel's call resumes late
        return inbound_id

    async def unanswered(self):  # type: ignore[no-untyped-def]
        found = await real_unanswered(self)
        recovered.set()
        return found

    monkeypatch.setattr(SQLiteStore, "record_inbound", record)
    monkeypatch.setattr(SQLiteStore, "unanswered", unanswered)

    class Early(RecordingChannel):
        async def start(self, inbox):  # type: ignore[no-untyped-def]
            await super().start(inbox)
            self.early = asyncio.create_task(inbox(dm("sent as the bot starts", "42", platform="telegram")))
            await asyncio.sleep(0.05)  # stored before recovery reads

    channel = Early("telegram")
    starting = asyncio.create_task(started(channel))
    await asyncio.wait_for(recovered.wait(), 5)
    await asyncio.sleep(0.05)
    resume.set()
    await starting
    await channel.early
    await channel.wait_for_replies(1)
    await asyncio.sleep(0.5)
    assert channel.texts() == ["echo: sent as the bot starts"] and len(llm.requests) == 1
