"""The channel contract: what every channel must do, run against each of them.

Each channel runs for real inside the whole App (store, gateway, agent, delivery) with the
real OpenAI SDK against the fake LLM: the terminal (``adapters/console``) reading a pipe,
Telegram (real python-telegram-bot) against the fake Bot API, Slack (real slack-bolt, Socket
Mode) against the fake Slack, Discord (real discord.py) against the fake Discord. The
core sees the channel through ``Recorder``, a transparent wrapper that records what the
core asked it to show (sends, edits, files, statuses, streamed text) and can make sends
fail; it also sets fast progress timings so that "typing stopped" shows within a second.

A new platform joins by adding a ``Harness`` subclass (how a user talks to it, whether it
has groups) and its name to ``CHANNELS``.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bot.app import App
from bot.channels import Channel, MessageShape, SendFailed, Status, Streams, Target
from bot.messages import Attachment, ChatType, InboundMessage
from bot.settings import load_config
from bot.store.sqlite import inbound_from_json
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.readback import measure, plain

CHANNELS = ["console", "telegram", "slack", "discord"]
FAST = {"status_every": 0.2, "edit_every": 0.2}  # progress timings under test


# ----------------------------------------------------------------------------- the recorder


@dataclass(frozen=True, slots=True)
class Shown:
    """One thing the core made the channel show: a send, an edit, a file, or a stream's text so far."""

    kind: str  # send | edit | file | stream
    message_id: str
    text: str
    time: float


class Recorder:
    """The channel as the core sees it: every call delegated to the real channel, and recorded.
    ``fail_sends`` makes that many next ``send`` calls raise ``SendFailed`` (not permanent)."""

    def __init__(self, inner: Any, shape: MessageShape, streaming: str) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dialect = inner.dialect
        self.shape = shape
        self.streaming = streaming
        self.shown: list[Shown] = []
        self.attempts: list[str] = []  # every send asked for, failed or not
        self.statuses: list[tuple[float, Status]] = []
        self.files: list[tuple[str, bytes, str]] = []
        self.fail_sends = 0
        self._changed = asyncio.Event()
        if streaming == "native":
            self.stream = self._stream

    async def start(self, inbox: Any) -> None:
        await self.inner.start(inbox)

    async def stop(self) -> None:
        await self.inner.stop()

    async def wait_closed(self) -> None:
        await self.inner.wait_closed()

    async def send(self, to: Target, text: str) -> str:
        self.attempts.append(text)
        self._bump()
        if self.fail_sends:
            self.fail_sends -= 1
            raise SendFailed("injected by the contract suite")
        message_id = await self.inner.send(to, text)
        self._record(Shown("send", message_id, text, time.monotonic()))
        return message_id

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        await self.inner.edit(to, message_id, text)
        self._record(Shown("edit", message_id, text, time.monotonic()))

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        message_id = await self.inner.send_file(to, name, data, caption)
        self.files.append((name, data, caption))
        self._record(Shown("file", message_id, caption, time.monotonic()))
        return message_id

    async def status(self, to: Target, status: Status) -> None:
        self.statuses.append((time.monotonic(), status))
        self._bump()
        await self.inner.status(to, status)

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        data: bytes = await self.inner.fetch(attachment, limit)
        return data

    async def _stream(self, to: Target) -> Any:
        inner = await self.inner.stream(to)
        return None if inner is None else _RecordedStream(self, inner)  # None: progress edits a draft here

    # -- what the user sees -------------------------------------------------------------

    def messages(self) -> list[str]:
        """Every message's final text (a file's caption), in the order they were created."""
        final: dict[str, str] = {}
        for s in self.shown:
            final[s.message_id] = s.text
        return [plain(text, self.dialect) for text in final.values()]

    def everything_shown(self) -> list[str]:
        return [plain(s.text, self.dialect) for s in self.shown]

    def working(self) -> int:
        return sum(1 for _, s in self.statuses if s is Status.WORKING)

    async def wait(self, ready: Callable[[], Any], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not ready():
                changed = self._changed
                await changed.wait()

    def _record(self, shown: Shown) -> None:
        self.shown.append(shown)
        self._bump()

    def _bump(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class _RecordedStream:
    def __init__(self, recorder: Recorder, inner: Any) -> None:
        self._recorder, self._inner, self._text = recorder, inner, ""

    async def append(self, text: str) -> None:
        await self._inner.append(text)
        self._text += text
        self._recorder._record(Shown("stream", "stream-draft", self._text, time.monotonic()))

    async def close(self) -> str | None:
        message_id: str | None = await self._inner.close()
        if message_id is not None:  # the draft is known by its platform id from now on
            self._recorder.shown[:] = [replace(s, message_id=message_id) if s.message_id == "stream-draft" else s
                                       for s in self._recorder.shown]
        return message_id


# ----------------------------------------------------------------------------- harnesses


class Harness:
    """One channel in the whole App, and how its user talks to it."""

    platform: ClassVar[str]
    has_groups: ClassVar[bool] = False
    sees_chatter: ClassVar[bool] = True  # unaddressed group messages reach the core (kept as context)
    dm_chat: ClassVar[str]  # the DM's chat id as the core sees it
    user: ClassVar[str]  # the DM user's id as the core sees it

    def __init__(self, tmp: Path, llm: FakeLLM) -> None:
        self.tmp, self.llm = tmp, llm
        self.app: App | None = None
        self.channel: Recorder | None = None

    def channel_yaml(self) -> str:
        return ""

    def build(self, config: Any) -> Channel:
        raise NotImplementedError

    def shape(self, inner: Any) -> MessageShape:
        return replace(inner.shape, **FAST)

    async def start(self, *, streaming: bool = False) -> Recorder:
        path = self.tmp / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}"}}}}
storage: {{path: "{self.tmp / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp / 'workspaces'}"}}
{self.channel_yaml()}
""")
        config = load_config(path, env={})
        inner = self.build(config)
        native = isinstance(inner, Streams)
        mode = ("native" if native else "edit") if streaming else "off"
        self.channel = Recorder(inner, self.shape(inner), mode)
        self.app = App(config, {self.platform: self.channel})  # type: ignore[dict-item]
        await self.app.__aenter__()
        return self.channel

    async def stop(self) -> None:
        app, self.app = self.app, None
        if app is not None:
            await app.__aexit__(None, None, None)

    async def say(self, text: str) -> None:
        """The DM user sends ``text``."""
        raise NotImplementedError

    async def say_in_group(self, text: str, *, mention: bool) -> None:
        raise NotImplementedError

    async def command(self, name: str) -> None:
        """The DM user gives a command the way the platform sends one (default: typed)."""
        await self.say(f"/{name}")

    def inbound(self) -> list[InboundMessage]:
        """The messages the core stored, in order (what the channel's inbound mapping made)."""
        with sqlite3.connect(f"file:{self.tmp / 'chatgate.db'}?mode=ro", uri=True) as db:
            rows = list(db.execute("SELECT payload FROM inbound WHERE payload != '' ORDER BY id"))
        return [inbound_from_json(payload) for (payload,) in rows]


class ConsoleHarness(Harness):
    """The terminal, reading lines from a pipe; the real one has no length limit, so the
    contract runs it with small ones."""

    platform = "console"
    dm_chat = user = "alice"

    def __init__(self, tmp: Path, llm: FakeLLM) -> None:
        super().__init__(tmp, llm)
        self._fds: list[int] = []
        self._writer = -1
        self.screen = io.StringIO()

    def build(self, config: Any) -> Channel:
        from adapters.console.channel import ConsoleChannel

        reader, self._writer = os.pipe()
        self._fds += [reader, self._writer]
        return ConsoleChannel(user=self.user, input_fd=reader, output=self.screen)  # type: ignore[return-value]

    def shape(self, inner: Any) -> MessageShape:
        return replace(inner.shape, chunk=400, max_chunks=4, **FAST)

    async def say(self, text: str) -> None:
        os.write(self._writer, text.encode() + b"\n")

    async def stop(self) -> None:
        await super().stop()
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


class TelegramHarness(Harness):
    platform = "telegram"
    has_groups = True
    dm_chat = user = "42"
    group = -1001234567890

    def __init__(self, tmp: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
        super().__init__(tmp, llm)
        self.tg = tg

    def channel_yaml(self) -> str:
        return (f'channels: {{telegram: {{enabled: true, token: "{self.tg.token}", base_url: "{self.tg.api_root}",'
                f" dm_policy: open, group_policy: open}}}}")

    def build(self, config: Any) -> Channel:
        from adapters.telegram.channel import TelegramChannel

        return TelegramChannel(config.channels.telegram)  # type: ignore[return-value]

    async def say(self, text: str) -> None:
        self.tg.push(self.tg.message(int(self.dm_chat), text, user_id=int(self.user)))

    async def say_in_group(self, text: str, *, mention: bool) -> None:
        self.tg.push(self.tg.message(self.group, f"@{self.tg.username} {text}" if mention else text, user_id=8))


class SlackHarness(Harness):
    platform = "slack"
    has_groups = True
    dm_chat, user, group = "D1", "U1", "C1"

    def __init__(self, tmp: Path, llm: FakeLLM, slack: FakeSlack) -> None:
        super().__init__(tmp, llm)
        self.slack = slack

    def channel_yaml(self) -> str:
        s = self.slack
        return (f'channels: {{slack: {{enabled: true, mode: socket, bot_token: "{s.bot_token}", '
                f'app_token: "{s.app_token}", signing_secret: "{s.signing_secret}", base_url: "{s.base_url}", '
                "dm_policy: open, group_policy: open}}")

    def build(self, config: Any) -> Channel:
        from adapters.slack.channel import SlackChannel
        from adapters.slack.dialect import SLACK

        return SlackChannel(config.channels.slack, SLACK)  # type: ignore[return-value]

    async def _push(self, payload: dict[str, Any]) -> None:
        await self.slack.wait_for_ack(await self.slack.push(payload))

    async def say(self, text: str) -> None:
        await self._push(self.slack.event(self.slack.message(self.dm_chat, text, user=self.user)))

    async def command(self, name: str) -> None:  # a slash command; one Slack keeps (/help) through /chatgate
        from adapters.slack.commands import RESERVED

        slash, text = ("/chatgate", name) if name in RESERVED else (f"/{name}", "")
        await self._push(self.slack.command(slash, self.dm_chat, text=text, user=self.user))

    async def say_in_group(self, text: str, *, mention: bool) -> None:
        body = f"<@{self.slack.bot_user}> {text}" if mention else text
        await self._push(self.slack.event(self.slack.message(self.group, body, user="U2")))


class DiscordHarness(Harness):
    platform = "discord"
    has_groups = True
    sees_chatter = False  # without the privileged Message Content intent (require_mention: true)
    user = "4242"

    def __init__(self, tmp: Path, llm: FakeLLM, dc: FakeDiscord) -> None:
        super().__init__(tmp, llm)
        self.dc = dc
        self.guild = dc.add_guild(channels={"general": 0})
        self.dm_chat = str(dc.dm_channel(int(self.user)))  # type: ignore[misc]

    def channel_yaml(self) -> str:
        d = self.dc
        return (f'channels: {{discord: {{enabled: true, token: "{d.token}", api_base: "{d.api_base}", '
                f'gateway_url: "{d.gateway_url}", dm_policy: open, guilds: ["{self.guild.id}"]}}}}')

    def build(self, config: Any) -> Channel:
        from adapters.discord.channel import DiscordChannel

        return DiscordChannel(config.channels.discord)  # type: ignore[return-value]

    async def say(self, text: str) -> None:
        self.dc.dm(int(self.user), text)

    async def say_in_group(self, text: str, *, mention: bool) -> None:
        general = self.guild.channel("general")
        if mention:
            self.dc.say(general, 4343, f"<@{self.dc.bot_id}> {text}", mentions=[self.dc.bot_id])
        else:
            self.dc.say(general, 4343, text)


@pytest.fixture
async def harness(request: pytest.FixtureRequest, tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Harness]:
    h: Harness
    if request.param == "console":
        h = ConsoleHarness(tmp_path, llm)
        try:
            yield h
        finally:
            await h.stop()
    elif request.param == "telegram":
        async with FakeTelegram() as tg:
            h = TelegramHarness(tmp_path, llm, tg)
            try:
                yield h
            finally:
                await h.stop()
    elif request.param == "slack":
        async with FakeSlack() as slack:
            h = SlackHarness(tmp_path, llm, slack)
            try:
                yield h
            finally:
                await h.stop()
    elif request.param == "discord":
        async with FakeDiscord() as dc:
            h = DiscordHarness(tmp_path, llm, dc)
            try:
                yield h
            finally:
                await h.stop()
    else:
        raise AssertionError(f"no harness for {request.param}")


pytestmark = pytest.mark.parametrize("harness", CHANNELS, indirect=True)


# ----------------------------------------------------------------------------- inbound


async def test_a_dm_maps_to_an_addressed_inbound_message(harness: Harness) -> None:
    channel = await harness.start()
    await harness.say("hello there")
    await channel.wait(lambda: channel.messages())
    (msg,) = harness.inbound()
    assert (msg.platform, msg.chat_type, msg.chat_id, msg.sender.id) == \
        (harness.platform, ChatType.DM, harness.dm_chat, harness.user)
    assert msg.addressed and msg.text == "hello there" and msg.message_id
    assert channel.messages() == ["echo: hello there"]


async def test_groups_answer_only_when_addressed(harness: Harness) -> None:
    if not harness.has_groups:
        pytest.skip(f"{harness.platform} has no group chats")
    channel = await harness.start()
    await harness.say_in_group("just chatting", mention=False)
    await harness.say_in_group("what now?", mention=True)
    await channel.wait(lambda: channel.messages())
    await asyncio.sleep(0.3)
    *quiet, addressed = harness.inbound()
    assert (addressed.chat_type, addressed.addressed, addressed.text) == (ChatType.GROUP, True, "what now?")
    assert [(m.chat_type, m.addressed, m.text) for m in quiet] == \
        ([(ChatType.GROUP, False, "just chatting")] if harness.sees_chatter else [])
    (answer,) = channel.messages()
    assert answer.endswith("what now?") and len(harness.llm.requests) == 1


async def test_unaddressed_group_messages_come_as_context(harness: Harness) -> None:
    if not (harness.has_groups and harness.sees_chatter):
        pytest.skip(f"{harness.platform} does not see unaddressed group messages")
    channel = await harness.start()
    await harness.say_in_group("just chatting", mention=False)
    await harness.say_in_group("what now?", mention=True)
    await channel.wait(lambda: channel.messages())
    assert "just chatting" in json.dumps(harness.llm.requests[0].body["messages"])


async def test_commands_are_answered_without_the_model(harness: Harness) -> None:
    channel = await harness.start()
    await harness.command("help")
    await channel.wait(lambda: channel.messages())
    await harness.command("stop")
    await channel.wait(lambda: len(channel.messages()) == 2)
    help_text, stop_text = channel.messages()
    assert "/stop" in help_text and stop_text == "Nothing is running."
    assert not harness.llm.requests


# ----------------------------------------------------------------------------- outbound


async def test_a_long_answer_is_split_into_messages_that_fit(harness: Harness) -> None:
    channel = await harness.start()
    limit = channel.shape.chunk
    paragraphs = [f"Part {i}: " + "word " * (limit // 20) for i in range(10)]
    answer = "\n\n".join(paragraphs)  # about three chunks' worth
    assert len(answer) > 2 * limit
    harness.llm.script(Reply.text(answer, chunk_size=2000))
    await harness.say("long please")
    await channel.wait(lambda: sum(len(m) for m in channel.messages()) >= len(answer) - 200)
    await asyncio.sleep(0.3)
    sends = [s.text for s in channel.shown if s.kind == "send"]
    assert 2 <= len(sends) <= channel.shape.max_chunks and not channel.files
    assert all(measure(text, channel.dialect, channel.shape) <= limit for text in sends)
    whole = " ".join(channel.messages())
    positions = [whole.index(f"Part {i}:") for i in range(len(paragraphs))]
    assert positions == sorted(positions)  # nothing lost, in order


async def test_an_answer_over_max_chunks_goes_as_a_markdown_file(harness: Harness) -> None:
    channel = await harness.start()
    shape = channel.shape
    answer = "Summary first.\n\n" + "\n\n".join(f"{i}: " + "lorem ipsum " * (shape.chunk // 24)
                                                for i in range(4 * shape.max_chunks))
    harness.llm.script(Reply.text(answer, chunk_size=5000))
    await harness.say("everything")
    await channel.wait(lambda: channel.files)
    await asyncio.sleep(0.3)
    ((name, data, _),) = channel.files
    assert name == "answer.md" and data.decode() == answer.strip()
    assert len(channel.messages()) <= 2 and "Summary first." in channel.messages()[0]


async def test_streaming_drafts_never_show_think(harness: Harness) -> None:
    channel = await harness.start(streaming=True)
    answer = "The answer is 42, because " + "it is known " * 20
    harness.llm.script(Reply.text(f"<think>the secret plan: flatter them</think>{answer}", chunk_size=3,
                                  delay=0.01))
    await harness.say("what is the answer?")
    await channel.wait(lambda: any(m.strip() == answer.strip() for m in channel.messages()))
    await asyncio.sleep(0.3)
    shown = channel.everything_shown()
    assert len(shown) > 1  # it streamed
    assert not [s for s in shown if "secret" in s or "think" in s]
    assert [m.strip() for m in channel.messages()] == [answer.strip()]


ENDINGS = ["answer", "no_reply", "failure", "stop"]


@pytest.mark.parametrize("ending", ENDINGS)
async def test_progress_stops_on_every_ending(harness: Harness, ending: str) -> None:
    channel = await harness.start(streaming=True)
    llm = harness.llm
    if ending == "answer":
        llm.script(Reply.text("all done " * 20, chunk_size=4, delay=0.03))
    elif ending == "no_reply":
        llm.script(Reply.text("NO_REPLY", chunk_size=2, delay=0.2))
    elif ending == "failure":
        llm.script(Reply.error(400, message="bad request"))
    else:
        llm.script(Reply.hang())
    await harness.say("go")
    await llm.wait_for_requests(1, timeout=10)
    if ending == "stop":
        await channel.wait(lambda: channel.working() >= 2)  # refreshed while the run lives
        await harness.command("stop")
    ends = {"answer": lambda: any("all done" in m for m in channel.messages()) and channel.statuses[-1][1] is Status.DONE,
            "no_reply": lambda: any(s is Status.SILENT for _, s in channel.statuses),
            "failure": lambda: channel.messages(),
            "stop": lambda: "Stopped." in channel.messages()}
    await channel.wait(ends[ending])
    await asyncio.sleep(0.3)  # a status request already in flight may still land
    working, shown = channel.working(), len(channel.shown)
    await asyncio.sleep(1.0)  # five refreshes, were it still on
    assert channel.working() == working and len(channel.shown) == shown
    if ending == "no_reply":
        assert channel.messages() == []
    elif ending == "failure":
        (sentence,) = channel.messages()
        assert sentence and "Traceback" not in sentence and "<" not in sentence
    elif ending == "stop":
        assert channel.messages()[-1] == "Stopped."


# ----------------------------------------------------------------------------- exactly once


async def test_a_failed_send_is_retried_and_delivered_once(harness: Harness) -> None:
    channel = await harness.start()
    channel.fail_sends = 1
    await harness.say("hello")
    await channel.wait(lambda: channel.messages(), timeout=10)
    await asyncio.sleep(0.5)
    assert channel.messages() == ["echo: hello"] and len(channel.attempts) == 2
    assert len(harness.llm.requests) == 1


async def test_an_answer_undelivered_at_close_is_delivered_once_after_reopening(harness: Harness) -> None:
    channel = await harness.start()
    channel.fail_sends = 10**6  # every send fails until the App is closed
    await harness.say("hello")
    await channel.wait(lambda: channel.attempts)
    await harness.stop()
    assert channel.messages() == []
    channel = await harness.start()  # the same store, a new channel object
    await channel.wait(lambda: channel.messages(), timeout=10)
    await asyncio.sleep(0.5)
    assert channel.messages() == ["echo: hello"] and len(harness.llm.requests) == 1
