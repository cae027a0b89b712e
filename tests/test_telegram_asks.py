"""Questions with buttons on Telegram (the port's ``Asks``): the real python-telegram-bot
against the fake Bot API, the channel alone with a recording inbox.

What every channel does (a press comes back once, deduped, answered privately, closed) is
in the channel contract suite; here what is Telegram's own: the keyboard's shape and its
64-byte ``callback_data``, the spinner answered exactly once, webhook mode, a forum topic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters.telegram.channel import TelegramChannel
from adapters.telegram.config import TelegramConfig
from bot.channels import Asks, Choice, Target
from bot.messages import ChatType
from tests.fakes.channel import CHOICES, RecordingInbox
from tests.fakes.telegram_server import FakeTelegram

GROUP = -1001234567890


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@asynccontextmanager
async def running(tg: FakeTelegram, keys: dict[str, Any] | None = None,
                  **options: Any) -> AsyncIterator[tuple[TelegramChannel, RecordingInbox]]:
    config = TelegramConfig.model_validate({"enabled": True, "token": tg.token, "base_url": tg.api_root,
                                            **(keys or {})})
    channel = TelegramChannel(config, poll_timeout=1, **options)
    inbox = RecordingInbox()
    await channel.start(inbox)
    try:
        yield channel, inbox
    finally:
        await channel.stop()


async def test_the_question_is_html_with_a_keyboard_two_buttons_a_row(tg: FakeTelegram) -> None:
    async with running(tg) as (channel, _):
        assert isinstance(channel, Asks)
        question = await channel.ask(Target("42"), "Run <code>ls -la</code>?", CHOICES)
        (sent,) = tg.sent
        assert question == str(sent.message_id) and sent.plain == "Run ls -la?" and sent.parse_mode == "HTML"
        rows = sent.params["reply_markup"]["inline_keyboard"]
        assert [[b["text"] for b in row] for row in rows] == [["Allow once", "Allow for this session"],
                                                              ["Always allow", "Deny"]]
        assert tg.buttons(42, sent.message_id) == [c.id for c in CHOICES]


async def test_a_choice_id_over_64_bytes_is_refused_before_sending(tg: FakeTelegram) -> None:
    async with running(tg) as (channel, _):
        with pytest.raises(ValueError, match="64"):
            await channel.ask(Target("42"), "?", [Choice("é" * 33, "Too long")])  # 66 bytes, 33 characters
        assert tg.sent == []
        await channel.ask(Target("42"), "?", [Choice("x" * 64, "Just fits")])
        assert len(tg.sent) == 1


async def test_the_core_s_answer_is_the_one_answer_and_a_late_one_is_dropped(tg: FakeTelegram) -> None:
    async with running(tg, answer_within=0.5) as (channel, inbox):
        question = int(await channel.ask(Target("42"), "Allow?", CHOICES))
        tg.press(42, question, CHOICES[0].id, user_id=42)
        (press,) = await inbox.wait(1)
        await channel.answer_press(press, "Allowed once.")
        await asyncio.sleep(0.8)  # past the channel's own deadline: no blank answer after the core's
        await channel.answer_press(press, "Again?")  # the core answers once; a second one is not sent
        (answer,) = tg.answers
        assert (answer.text, answer.show_alert) == ("Allowed once.", False)
        assert [c.method for c in tg.calls].count("answerCallbackQuery") == 1


async def test_a_press_the_core_does_not_answer_is_answered_blank_by_the_channel(tg: FakeTelegram) -> None:
    async with running(tg, answer_within=0.3) as (channel, inbox):
        question = int(await channel.ask(Target("42"), "Allow?", CHOICES))
        update = tg.press(42, question, CHOICES[3].id, user_id=42)
        (press,) = await inbox.wait(1)
        await tg.wait_for(lambda: tg.answers, timeout=3)
        assert tg.answers[0].time - tg.presses[press.message_id.removeprefix("cb:")] < 1.0
        tg.redeliver(update)  # the same update again: handed over again, not answered again
        await inbox.wait(2)
        await asyncio.sleep(0.5)
        await channel.answer_press(press, "Too late")
        assert len(tg.answers) == 1 and tg.answers[0].text is None
        assert inbox.messages[0].message_id == inbox.messages[1].message_id


async def test_closing_edits_the_text_and_removes_the_keyboard(tg: FakeTelegram) -> None:
    async with running(tg) as (channel, _):
        question = await channel.ask(Target("42"), "Allow <b>exec</b>?", CHOICES)
        await channel.close_question(Target("42"), question, "<b>exec</b>: allowed once by Alice")
        await channel.close_question(Target("42"), question, "<b>exec</b>: allowed once by Alice")  # not modified
        (edit,) = tg.edits
        assert edit.plain == "exec: allowed once by Alice" and edit.reply_markup is None
        assert tg.buttons(42, int(question)) == []


async def test_a_press_in_a_forum_topic_keeps_its_topic(tg: FakeTelegram) -> None:
    tg.push(tg.message(GROUP, "@chatgate_bot hi", user_id=7, is_forum=True, message_thread_id=5))
    async with running(tg) as (channel, inbox):
        (msg,) = await inbox.wait(1)
        question = await channel.ask(Target.of(msg), "Allow?", CHOICES)
        assert tg.sent[0].thread_id == 5
        tg.press(GROUP, int(question), CHOICES[1].id, user_id=8, first_name="Bob")
        _, press = await inbox.wait(2)
        assert (press.chat_id, press.chat_type, press.thread_id, press.sender.id, press.sender.name) == (
            str(GROUP), ChatType.GROUP, "5", "8", "Bob")
        assert (press.reply_to, press.text, press.addressed) == (question, CHOICES[1].id, True)


async def test_presses_come_through_the_webhook_too(tg: FakeTelegram, unused_tcp_port: int) -> None:
    keys = {"mode": "webhook", "webhook": {"listen": "127.0.0.1", "port": unused_tcp_port, "path": "/tg",
                                           "url": f"https://127.0.0.1:{unused_tcp_port}/tg", "secret_token": "s3cret"}}
    async with running(tg, keys, answer_within=0.3) as (channel, inbox):
        assert tg.webhook is not None and "callback_query" in (tg.webhook.allowed_updates or ())
        question = int(await channel.ask(Target("42"), "Allow?", CHOICES))
        update = tg.press(42, question, CHOICES[0].id, user_id=42)
        assert await tg.post_webhook_update(update) == 200
        (press,) = inbox.messages
        assert press.text == CHOICES[0].id and press.reply_to == str(question)
        await tg.wait_for(lambda: tg.answers, timeout=3)
