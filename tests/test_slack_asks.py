"""Questions with buttons on Slack (the port's ``Asks``): the real slack-bolt and slack_sdk
against the fake Slack, the channel alone with a recording inbox.

What every channel does is in the channel contract suite (which runs Slack in Socket Mode);
here what is Slack's own: the Block Kit, presses through both Socket Mode and the HTTP
Request URL (signed, form-encoded ``payload=``) acknowledged well within 3 s, a slow store
still acknowledged, the ephemeral answer, the Stop button left alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.slack.blocks import question_blocks
from adapters.slack.channel import SlackChannel
from adapters.slack.config import SlackConfig
from adapters.slack.dialect import SLACK
from adapters.slack.inbound import ASK_BLOCK
from bot.channels import Asks, Choice, Target
from bot.messages import ChatType, InboundMessage
from tests.fakes.channel import CHOICES, RecordingInbox
from tests.fakes.slack_server import FakeSlack

pytestmark = pytest.mark.timeout(20)

THREAD = "1700000000.000100"


class SlowInbox(RecordingInbox):
    """Storage that takes ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay

    async def __call__(self, msg: InboundMessage) -> None:
        await asyncio.sleep(self.delay)
        await super().__call__(msg)


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.add_user("U2", "bob", "Bob")
        yield fake


@asynccontextmanager
async def running(slack: FakeSlack, mode: str = "socket", delay: float = 0.0
                  ) -> AsyncIterator[tuple[SlackChannel, SlowInbox]]:
    config = SlackConfig.model_validate({
        "enabled": True, "mode": mode, "bot_token": slack.bot_token, "app_token": slack.app_token,
        "signing_secret": slack.signing_secret, "base_url": slack.base_url,
        "http": {"listen": "127.0.0.1", "port": 0}, "channels": ["*"]})
    channel, inbox = SlackChannel(config, SLACK), SlowInbox(delay)
    await channel.start(inbox)
    try:
        yield channel, inbox
    finally:
        await channel.stop()


async def press(slack: FakeSlack, channel: SlackChannel, mode: str, payload: dict[str, Any]) -> float:
    """Send a press the way ``mode`` does; seconds until Slack had its acknowledgement."""
    if mode == "socket":
        envelope = await slack.push(payload)
        await slack.wait_for_ack(envelope)
        return slack.ack_delay(envelope)
    status, _ = await slack.post_event(f"http://127.0.0.1:{channel.port}/slack/events", payload)
    assert status == 200
    return slack.answers[-1].seconds


def test_the_blocks_are_sections_and_one_actions_block_of_buttons() -> None:
    *text, actions = question_blocks("*Run* `ls`?", CHOICES)
    assert text == [{"type": "section", "text": {"type": "mrkdwn", "text": "*Run* `ls`?"}}]
    assert actions["block_id"] == ASK_BLOCK
    assert [(b["action_id"], b["value"], b["text"]["text"]) for b in actions["elements"]] == [
        (c.id, c.id, c.label) for c in CHOICES]
    (long,) = question_blocks("?", [Choice("x", "l" * 100)])[-1]["elements"]
    assert len(long["text"]["text"]) == 75 and long["text"]["text"].endswith("…")
    with pytest.raises(ValueError):
        question_blocks("?", [Choice("same", "A"), Choice("same", "B")])
    with pytest.raises(ValueError):
        question_blocks("?", [])


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_a_press_comes_through_either_mode_acked_within_3_s(slack: FakeSlack, mode: str) -> None:
    async with running(slack, mode) as (channel, inbox):
        assert isinstance(channel, Asks)
        to = Target("C1", ChatType.GROUP, THREAD)
        question = await channel.ask(to, "Allow *exec*?", CHOICES)
        (post,) = slack.posts
        assert (post.channel, post.ts, post.thread_ts, post.text) == ("C1", question, THREAD, "Allow *exec*?")
        seconds = await press(slack, channel, mode, slack.click(post, CHOICES[1].id, user="U2"))
        assert seconds < 3.0
        (msg,) = await inbox.wait(1)
        assert (msg.platform, msg.chat_id, msg.chat_type, msg.thread_id, msg.reply_to) == (
            "slack", "C1", ChatType.GROUP, THREAD, question)
        assert (msg.sender.id, msg.text, msg.addressed, msg.message_id.startswith("act:")) == (
            "U2", CHOICES[1].id, True, True)


async def test_a_slow_store_is_still_acked_within_slack_s_3_s(slack: FakeSlack) -> None:
    async with running(slack, "http", delay=1.0) as (channel, inbox):
        question = await channel.ask(Target("D1"), "Allow?", CHOICES)
        seconds = await press(slack, channel, "http", slack.click(slack.messages[("D1", question)], CHOICES[0].id))
        assert 1.0 <= seconds < 3.0 and len(inbox.messages) == 1  # stored, then acknowledged


async def test_an_unsigned_press_is_refused(slack: FakeSlack) -> None:
    async with running(slack, "http") as (channel, inbox):
        question = await channel.ask(Target("D1"), "Allow?", CHOICES)
        click = slack.click(slack.messages[("D1", question)], CHOICES[0].id)
        url = f"http://127.0.0.1:{channel.port}/slack/events"
        assert (await slack.post_event(url, click, bad_signature=True))[0] == 401
        await asyncio.sleep(0.2)
        assert inbox.messages == []


async def test_a_top_level_question_s_press_has_no_thread(slack: FakeSlack) -> None:
    """A question at the top of a DM that later got replies is a thread's root: its press is not
    in that thread (it is the session of the DM itself)."""
    async with running(slack) as (channel, inbox):
        question = await channel.ask(Target("D1"), "Allow?", CHOICES)
        click = slack.click(slack.messages[("D1", question)], CHOICES[0].id)
        click["container"]["thread_ts"] = click["message"]["thread_ts"] = question
        await press(slack, channel, "socket", click)
        (msg,) = await inbox.wait(1)
        assert (msg.chat_type, msg.thread_id, msg.reply_to) == (ChatType.DM, None, question)


async def test_the_answer_is_ephemeral_and_closing_leaves_no_buttons(slack: FakeSlack) -> None:
    async with running(slack) as (channel, inbox):
        to = Target("C1", ChatType.GROUP, THREAD)
        question = await channel.ask(to, "Allow?", CHOICES)
        await press(slack, channel, "socket", slack.click(slack.messages[("C1", question)], CHOICES[0].id, user="U2"))
        (msg,) = await inbox.wait(1)
        await channel.answer_press(msg, "Only the person who asked can decide.")
        await channel.answer_press(msg)  # nothing to say: nothing sent
        (ephemeral,) = slack.ephemerals
        assert (ephemeral.channel, ephemeral.user, ephemeral.thread_ts, ephemeral.text) == (
            "C1", "U2", THREAD, "Only the person who asked can decide.")
        assert [p.method for p in slack.posts] == ["chat.postMessage"]  # nothing in the channel itself
        await channel.close_question(to, question, "*exec*: denied by Alice")
        now = slack.messages[("C1", question)]
        assert now.text == "*exec*: denied by Alice" and not [b for b in now.blocks or () if b["type"] == "actions"]


async def test_an_answer_slack_refuses_is_logged_not_raised(slack: FakeSlack) -> None:
    async with running(slack) as (channel, inbox):
        question = await channel.ask(Target("D1"), "Allow?", CHOICES)
        await press(slack, channel, "socket", slack.click(slack.messages[("D1", question)], CHOICES[0].id))
        (msg,) = await inbox.wait(1)
        slack.fail_next("chat.postEphemeral", "user_not_in_channel")
        await channel.answer_press(msg, "Expired.")
        assert slack.ephemerals == []


async def test_the_stop_button_is_not_a_press(slack: FakeSlack) -> None:
    async with running(slack) as (channel, inbox):
        post_ts = await channel.ask(Target("D1"), "Allow?", CHOICES)
        stop = slack.click(slack.messages[("D1", post_ts)], CHOICES[0].id)
        stop["actions"][0] |= {"action_id": "chatgate_stop", "block_id": "other", "value": THREAD}
        await press(slack, channel, "socket", stop)
        (msg,) = await inbox.wait(1)
        assert msg.text == "/stop" and msg.reply_to is None
