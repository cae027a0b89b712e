"""The channel contract: what every channel must do, run against each of them.

Each channel runs for real inside the whole App (store, gateway, agent, delivery) with the
real OpenAI SDK against the fake LLM: the terminal (``adapters/console``) reading a pipe,
Telegram (real python-telegram-bot) against the fake Bot API, Slack (real slack-bolt, Socket
Mode) against the fake Slack, Discord (real discord.py) against the fake Discord. The
core sees the channel through ``Recorder``, a transparent wrapper that records what the
core asked it to show (sends, edits, files, statuses, streamed text) and can make sends
fail; it also sets fast progress timings so that "typing stopped" shows within a second.

Questions with buttons (the ``Asks`` capability) are tested on the channel alone
(``start_alone``: a recording inbox, no core), so that what a press becomes is seen as the
channel hands it over, and through the whole App where the core's dedupe matters.

A new platform joins by adding a ``Harness`` subclass (how a user talks to it, whether it
has groups, how someone presses a button) and its name to ``CHANNELS``.
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
from bot.channels import (
    Asks,
    Channel,
    Choice,
    MessageShape,
    RecallsInbound,
    ReportsUndelivered,
    SendFailed,
    SendsPhoto,
    Status,
    Streams,
    Target,
    Windowed,
)
from bot.messages import Attachment, ChatType, InboundMessage
from bot.outbound.markdown import render
from bot.outbound.split import measure
from bot.settings import load_config
from bot.store.inbound import inbound_from_json
from tests.fakes.channel import CHOICES, RecordingInbox
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.whatsapp_server import FakeWhatsApp
from tests.readback import measure, plain

CHANNELS = ["console", "telegram", "slack", "discord", "whatsapp"]
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
        if isinstance(inner, Asks):  # the core finds the capability where the channel offers it
            self.ask, self.answer_press, self.close_question = inner.ask, inner.answer_press, inner.close_question
        if isinstance(inner, Windowed):
            self.reach = inner.reach
        if isinstance(inner, RecallsInbound):
            self.recall_inbound = inner.recall_inbound
        if isinstance(inner, ReportsUndelivered):
            self.report_undelivered = inner.report_undelivered
        if isinstance(inner, SendsPhoto):
            self.send_photo = self._send_photo

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

    async def _send_photo(self, to: Target, name: str, data: bytes, caption: str) -> str:
        message_id: str = await self.inner.send_photo(to, name, data, caption)
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

    presser: ClassVar[str]  # who presses a question's button (in a group: not the DM user)
    redelivers: ClassVar[bool] = True  # the platform can send the same press twice
    press_wait: ClassVar[float] = 0.0  # seconds after a press within which the platform's deadline falls
    edits: ClassVar[bool] = True  # the platform can edit a sent message (else a run's text never streams)
    removes_buttons: ClassVar[bool] = True  # a closed question loses its buttons (else its outcome quotes it)

    def __init__(self, tmp: Path, llm: FakeLLM) -> None:
        self.tmp, self.llm = tmp, llm
        self.extra_yaml = ""  # more of the config, for tests of a feature through every channel
        self.app: App | None = None
        self.channel: Recorder | None = None
        self.alone: Any = None  # the channel started without the App (start_alone)

    def channel_yaml(self) -> str:
        return ""

    def build(self, config: Any) -> Channel:
        raise NotImplementedError

    def shape(self, inner: Any) -> MessageShape:
        return replace(inner.shape, **FAST)

    def config(self) -> Any:
        path = self.tmp / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}"}}}}
storage: {{path: "{self.tmp / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp / 'workspaces'}"}}
{self.channel_yaml()}
{self.extra_yaml}
""")
        return load_config(path, env={})

    async def start_alone(self) -> tuple[Any, RecordingInbox]:
        """The channel without the core: what it hands over is recorded, nothing is deduped."""
        await self.stop_alone()
        inbox = RecordingInbox()
        self.alone = self.build(self.config())
        await self.alone.start(inbox)
        return self.alone, inbox

    async def stop_alone(self) -> None:
        alone, self.alone = self.alone, None
        if alone is not None:
            await alone.stop()

    async def start(self, *, streaming: bool = False) -> Recorder:
        config = self.config()
        inner = self.build(config)
        native = isinstance(inner, Streams)
        mode = ("native" if native else "edit") if streaming and (native or self.edits) else "off"
        self.channel = Recorder(inner, self.shape(inner), mode)
        self.app = App(config, {self.platform: self.channel})  # type: ignore[dict-item]
        await self.app.__aenter__()
        return self.channel

    async def stop(self) -> None:
        await self.stop_alone()
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

    # -- questions (Asks) -------------------------------------------------------------

    def place(self) -> Target:
        """Where the contract asks its questions: a group (and thread) where the platform has one."""
        raise NotImplementedError

    async def press(self, question: str, choice: Choice) -> None:
        """``presser`` presses ``choice`` on the question; returns once the platform sent it."""
        raise NotImplementedError

    async def press_again(self) -> None:
        """The platform sends the last press once more (a redelivery)."""
        raise NotImplementedError

    def buttons(self, question: str) -> list[str]:
        """The choice ids the question can still be answered with, as the platform shows it."""
        raise NotImplementedError

    def question_text(self, question: str) -> str:
        raise NotImplementedError

    def answers_to(self, press: InboundMessage) -> list[str]:
        """What the presser alone was shown in answer to ``press``."""
        raise NotImplementedError

    def shown_to_all(self) -> list[str]:
        """Every text of the bot that everyone in the chat sees."""
        return []

    def deadlines_met(self) -> None:
        """Assert that every press so far was acknowledged as the platform requires."""

    def inbound(self) -> list[InboundMessage]:
        """The messages the core stored, in order (what the channel's inbound mapping made)."""
        with sqlite3.connect(f"file:{self.tmp / 'chatgate.db'}?mode=ro", uri=True) as db:
            rows = list(db.execute("SELECT payload FROM inbound WHERE payload != '' ORDER BY id"))
        return [inbound_from_json(payload) for (payload,) in rows]


class ConsoleHarness(Harness):
    """The terminal, reading lines from a pipe; the real one has no length limit, so the
    contract runs it with small ones."""

    platform = "console"
    dm_chat = user = presser = "alice"
    redelivers = False

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
        return replace(inner.shape, chunk=600, max_chunks=4, **FAST)

    async def say(self, text: str) -> None:
        os.write(self._writer, text.encode() + b"\n")

    def place(self) -> Target:
        return Target(self.dm_chat)

    def _console(self) -> Any:
        return self.alone or (self.channel.inner if self.channel is not None else None)

    async def press(self, question: str, choice: Choice) -> None:
        await self.say(choice.key)

    def buttons(self, question: str) -> list[str]:
        return list(self._console()._questions.get(question, {}).values())  # the terminal's open questions

    def question_text(self, question: str) -> str:
        return self.screen.getvalue()

    def answers_to(self, press: InboundMessage) -> list[str]:
        return [line.strip() for line in self.screen.getvalue().splitlines()
                if line.startswith("  ") and not line.startswith("      [")]

    async def stop(self) -> None:
        await super().stop()
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


class TelegramHarness(Harness):
    platform = "telegram"
    has_groups = True
    dm_chat = user = "42"
    presser = "8"
    group = -1001234567890
    press_wait = 2.5  # the channel answers a press blank after 2 s

    def __init__(self, tmp: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
        super().__init__(tmp, llm)
        self.tg = tg
        self._pressed: list[dict[str, Any]] = []

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

    def place(self) -> Target:
        return Target(str(self.group), ChatType.GROUP)

    async def press(self, question: str, choice: Choice) -> None:
        self._pressed.append(self.tg.press(self.group, int(question), choice.id, user_id=int(self.presser),
                                           first_name="Bob"))

    async def press_again(self) -> None:
        self.tg.redeliver(self._pressed[-1])

    def buttons(self, question: str) -> list[str]:
        return self.tg.buttons(self.group, int(question))

    def question_text(self, question: str) -> str:
        return str(self.tg.messages[(self.group, int(question))]["text"])

    def answers_to(self, press: InboundMessage) -> list[str]:
        query = press.message_id.removeprefix("cb:")
        return [a.text for a in self.tg.answers if a.query_id == query and a.text and not a.show_alert]

    def shown_to_all(self) -> list[str]:
        return [s.plain or "" for s in self.tg.sent] + [e.plain for e in self.tg.edits]

    def deadlines_met(self) -> None:
        """Every press answered exactly once (the spinner stops), within 3 s."""
        for update in self._pressed:
            query = update["callback_query"]["id"]
            answers = [a for a in self.tg.answers if a.query_id == query]
            assert len(answers) == 1 and answers[0].time - self.tg.presses[query] < 3.0


class SlackHarness(Harness):
    platform = "slack"
    has_groups = True
    dm_chat, user, group, presser = "D1", "U1", "C1", "U2"
    thread = "1700000000.000100"

    def __init__(self, tmp: Path, llm: FakeLLM, slack: FakeSlack) -> None:
        super().__init__(tmp, llm)
        self.slack = slack
        slack.add_user(self.presser, "bob", "Bob")
        self._pressed: list[dict[str, Any]] = []
        self._envelopes: list[str] = []

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

    def place(self) -> Target:
        return Target(self.group, ChatType.GROUP, self.thread)

    async def _press(self, payload: dict[str, Any], retry: int = 0) -> None:
        envelope = await self.slack.push(payload, retry_attempt=retry)
        self._envelopes.append(envelope)
        await self.slack.wait_for_ack(envelope)

    async def press(self, question: str, choice: Choice) -> None:
        self._pressed.append(self.slack.click(self.slack.messages[(self.group, question)], choice.id,
                                              user=self.presser))
        await self._press(self._pressed[-1])

    async def press_again(self) -> None:
        await self._press(self._pressed[-1], retry=1)

    def buttons(self, question: str) -> list[str]:
        blocks = self.slack.messages[(self.group, question)].blocks or []
        return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]

    def question_text(self, question: str) -> str:
        return self.slack.messages[(self.group, question)].text

    def answers_to(self, press: InboundMessage) -> list[str]:
        return [e.text for e in self.slack.ephemerals if e.user == press.sender.id and e.channel == press.chat_id]

    def shown_to_all(self) -> list[str]:
        return [p.text for p in self.slack.posts]

    def deadlines_met(self) -> None:
        """Every press acknowledged within Slack's 3 s."""
        assert self._envelopes and all(self.slack.ack_delay(e) < 3.0 for e in self._envelopes)


class DiscordHarness(Harness):
    platform = "discord"
    has_groups = True
    sees_chatter = False  # without the privileged Message Content intent (require_mention: true)
    user, presser = "4242", "4343"

    def __init__(self, tmp: Path, llm: FakeLLM, dc: FakeDiscord) -> None:
        super().__init__(tmp, llm)
        self.dc = dc
        self.guild = dc.add_guild(channels={"general": 0})
        self.dm_chat = str(dc.dm_channel(int(self.user)))  # type: ignore[misc]
        self._pressed: list[dict[str, Any]] = []

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

    def place(self) -> Target:
        return Target(str(self.guild.channel("general")), ChatType.GROUP)

    async def press(self, question: str, choice: Choice) -> None:
        await self.dc.wait_connected()
        self._pressed.append(self.dc.press(question, choice.id, int(self.presser)))

    async def press_again(self) -> None:
        self.dc.dispatch("INTERACTION_CREATE", self._pressed[-1])  # what a gateway RESUME replays

    def buttons(self, question: str) -> list[str]:
        return self.dc.buttons(question)

    def question_text(self, question: str) -> str:
        return str(self.dc.messages[int(question)]["content"])

    def answers_to(self, press: InboundMessage) -> list[str]:
        interaction = int(press.message_id.removeprefix("int:"))
        return [f.content for f in self.dc.followups if f.ephemeral and f.interaction_id == interaction]

    def shown_to_all(self) -> list[str]:
        return [s.content for s in self.dc.sent] + [f.content for f in self.dc.followups if not f.ephemeral]

    def deadlines_met(self) -> None:
        """Every press answered (deferred) within Discord's 3 s."""
        for interaction in self._pressed:
            iid = int(interaction["id"])
            assert self.dc.answered[iid] - self.dc.dispatched[iid] < 3.0


class WhatsAppHarness(Harness):
    """DMs only (the Cloud API has none of WhatsApp's groups); a question is answered in the DM."""

    platform = "whatsapp"
    dm_chat = user = presser = "491701234567"
    edits = False
    removes_buttons = False  # WhatsApp keeps a sent message's buttons: the outcome is a reply quoting it

    def __init__(self, tmp: Path, llm: FakeLLM, wa: FakeWhatsApp) -> None:
        super().__init__(tmp, llm)
        self.wa = wa
        wa.last_inbound[self.user] = wa.now()  # the person wrote lately: questions may go to them
        self._pressed: list[dict[str, Any]] = []

    def channel_yaml(self) -> str:
        w = self.wa
        return (f'channels: {{whatsapp: {{enabled: true, phone_number_id: "{w.phone_number_id}", '
                f'access_token: "{w.token}", app_secret: "{w.app_secret}", verify_token: "{w.verify_token}", '
                f'base_url: "{w.base_url}", webhook: {{bind: "127.0.0.1:0"}}, dm_policy: open}}}}')

    def build(self, config: Any) -> Channel:
        from adapters.whatsapp.channel import WhatsAppChannel

        return WhatsAppChannel(config.channels.whatsapp)  # type: ignore[return-value]

    async def _post(self, body: dict[str, Any]) -> None:
        inner = self.alone or (self.channel.inner if self.channel is not None else None)
        assert inner is not None and inner.port
        assert await self.wa.post(body, url=f"http://127.0.0.1:{inner.port}/whatsapp") == 200

    async def say(self, text: str) -> None:
        await self._post(self.wa.text(text, user=self.user))

    def place(self) -> Target:
        return Target(self.dm_chat)

    async def press(self, question: str, choice: Choice) -> None:
        self._pressed.append(self.wa.press(question, choice.id, user=self.presser))
        await self._post(self._pressed[-1])

    async def press_again(self) -> None:
        await self._post(self._pressed[-1])  # Meta posts a body again when it saw no 200 in time

    def buttons(self, question: str) -> list[str]:
        return self.wa.buttons(question)

    def question_text(self, question: str) -> str:
        """The question, and the outcome that quotes it (what the person reads last about it)."""
        return "\n".join(s.text for s in self.wa.sent if question in (s.id, s.quoted))

    def answers_to(self, press: InboundMessage) -> list[str]:
        return [s.text for s in self.wa.sent if s.quoted == press.message_id and s.to == press.sender.id]

    def deadlines_met(self) -> None:
        """Every post answered 200 within a few seconds (Meta retries a slow or failed one)."""
        assert self.wa.posts and all(p.status == 200 and p.seconds < 3.0 for p in self.wa.posts)


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
    elif request.param == "whatsapp":
        async with FakeWhatsApp() as wa:
            h = WhatsAppHarness(tmp_path, llm, wa)
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
    await channel.wait(lambda: any("this list" in m for m in channel.messages()))  # its last line
    await harness.command("stop")
    await channel.wait(lambda: "Nothing is running." in channel.messages())
    *help_text, stop_text = channel.messages()  # /help may take several chunks where they are small
    assert "/stop" in "\n".join(help_text) and stop_text == "Nothing is running."
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
    if not harness.edits:
        pytest.skip(f"{harness.platform} cannot edit a message: answers are sent whole")
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


# ----------------------------------------------------------------------------- questions (Asks)



async def ask(harness: Harness, channel: Any, markdown: str = "Run **exec** `ls -la`?") -> str:
    question: str = await channel.ask(harness.place(), render(markdown, channel.dialect), CHOICES)
    return question


async def test_a_question_shows_its_buttons_and_a_press_comes_back_once(harness: Harness) -> None:
    channel, inbox = await harness.start_alone()
    assert isinstance(channel, Asks)
    question = await ask(harness, channel)
    assert harness.buttons(question) == [c.id for c in CHOICES] and "exec" in harness.question_text(question)
    await harness.press(question, CHOICES[1])
    (press,) = await inbox.wait(1)
    to = harness.place()
    assert (press.platform, press.chat_id, press.chat_type, press.thread_id) == (
        harness.platform, to.chat_id, to.chat_type, to.thread_id)
    assert (press.sender.id, press.reply_to, press.text, press.addressed) == (
        harness.presser, question, CHOICES[1].id, True)
    assert press.message_id and press.message_id != question
    await asyncio.sleep(0.3)
    assert len(inbox.messages) == 1


async def test_a_redelivered_press_comes_with_the_same_message_id(harness: Harness) -> None:
    if not harness.redelivers:
        pytest.skip(f"{harness.platform} never sends a press twice")
    channel, inbox = await harness.start_alone()
    question = await ask(harness, channel)
    await harness.press(question, CHOICES[0])
    await inbox.wait(1)
    await harness.press_again()
    first, again = await inbox.wait(2)
    assert again.message_id == first.message_id and again.reply_to == first.reply_to == question


async def test_a_press_that_comes_twice_is_stored_once_by_the_core(harness: Harness) -> None:
    if not harness.redelivers:
        pytest.skip(f"{harness.platform} never sends a press twice")
    recorder = await harness.start()
    question = await ask(harness, recorder.inner)
    await harness.press(question, CHOICES[3])
    await harness.press_again()
    async with asyncio.timeout(10):  # the store is polled: what the core does with a press is its own
        while not [m for m in harness.inbound() if m.reply_to == question]:
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    (stored,) = [m for m in harness.inbound() if m.reply_to == question]
    assert stored.text == CHOICES[3].id and stored.sender.id == harness.presser


async def test_the_answer_to_a_press_reaches_only_the_presser(harness: Harness) -> None:
    channel, inbox = await harness.start_alone()
    question = await ask(harness, channel)
    await harness.press(question, CHOICES[0])
    (press,) = await inbox.wait(1)
    await channel.answer_press(press, "Only the person who asked can decide.")
    assert harness.answers_to(press) == ["Only the person who asked can decide."]
    assert not [t for t in harness.shown_to_all() if "Only the person" in t]


async def test_a_closed_question_shows_the_outcome_and_no_buttons(harness: Harness) -> None:
    channel, inbox = await harness.start_alone()
    question = await ask(harness, channel)
    await harness.press(question, CHOICES[0])
    await inbox.wait(1)
    await channel.close_question(harness.place(), question, render("**exec** `ls -la`: allowed once by Bob",
                                                                   channel.dialect))
    if harness.removes_buttons:
        assert harness.buttons(question) == []
    assert "exec ls -la: allowed once by Bob" in plain(harness.question_text(question), channel.dialect)


async def test_a_press_meets_the_platform_deadline_though_the_core_never_answers(harness: Harness) -> None:
    if harness.platform == "console":
        pytest.skip("the terminal has no deadline for an answer")
    channel, inbox = await harness.start_alone()
    question = await ask(harness, channel)
    await harness.press(question, CHOICES[2])
    await inbox.wait(1)
    await asyncio.sleep(harness.press_wait)
    harness.deadlines_met()


async def test_a_question_asked_before_a_restart_can_still_be_pressed(harness: Harness) -> None:
    if harness.platform == "console":
        pytest.skip("a terminal's questions end with its process")
    channel, _ = await harness.start_alone()
    question = await ask(harness, channel)
    _, inbox = await harness.start_alone()  # a new channel object: nothing of the first one is left
    await harness.press(question, CHOICES[1])
    (press,) = await inbox.wait(1)
    assert (press.reply_to, press.text, press.sender.id) == (question, CHOICES[1].id, harness.presser)
    await asyncio.sleep(harness.press_wait)
    harness.deadlines_met()
