"""The fake Telegram Bot API, driven by the real python-telegram-bot: if PTB accepts what the
fake answers and the fake refuses what Telegram refuses, channel tests can trust it."""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from telegram import Bot, BotCommand, InputFile, ReplyParameters, Update
from telegram.error import BadRequest, ChatMigrated, Conflict, Forbidden, InvalidToken, NetworkError, RetryAfter
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters

from tests.fakes.telegram_html import EntityParseError, detect_entities, parse_html, utf16_len
from tests.fakes.telegram_server import FakeTelegram

pytestmark = [pytest.mark.timeout(10),  # PTB 22 warns about its own RetryAfter.retry_after type change
              pytest.mark.filterwarnings("ignore:.*retry_after.*:telegram.warnings.PTBDeprecationWarning")]


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url) as real_bot:
        yield real_bot


def _app(fake: FakeTelegram) -> Application:
    return ApplicationBuilder().token(fake.token).base_url(fake.base_url).base_file_url(fake.base_file_url).build()


def _seconds(error: RetryAfter) -> float:
    value = error.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


# ----------------------------------------------------------------------------- identity and sending


async def test_get_me_and_urls(fake: FakeTelegram, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.first_name, me.is_bot) == (123456, "chatgate_bot", "chatgate", True)
    assert fake.base_url == f"http://127.0.0.1:{fake.port}/bot" and fake.api_root.endswith(str(fake.port))
    assert fake.calls[0].method == "getMe"


async def test_invalid_token_is_refused(fake: FakeTelegram) -> None:
    with pytest.raises(InvalidToken, match="rejected by the server"):
        async with Bot("999:WRONG-TOKEN", base_url=fake.base_url) as wrong:
            await wrong.get_me()
    async with aiohttp.ClientSession() as http, http.post(f"{fake.base_url}999:WRONG/getMe") as response:
        assert (response.status, await response.json()) == \
            (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})


async def test_send_message_and_read_it_back(fake: FakeTelegram, bot: Bot) -> None:
    fake.push(fake.message(42, "hi", first_name="Ann"))  # the user's message takes id 1 in chat 42
    first = await bot.send_message(42, "hello", reply_parameters=ReplyParameters(1), disable_notification=True)
    second = await bot.send_message(42, "again", message_thread_id=7)
    other = await bot.send_message(-1001234567890, "a group")

    assert (first.message_id, second.message_id, other.message_id) == (2, 3, 1)  # ids per chat
    assert first.from_user.id == 123456 and first.chat.type == "private" and first.text == "hello"
    assert first.reply_to_message is not None and first.reply_to_message.text == "hi"
    assert second.message_thread_id == 7 and other.chat.type == "supergroup"
    record = fake.sent[0]
    assert (record.method, record.chat_id, record.text, record.reply_to, record.message_id) == \
        ("sendMessage", 42, "hello", 1, 2)
    assert record.params["disable_notification"] is True and fake.sent[1].thread_id == 7
    with pytest.raises(BadRequest, match="Message to be replied not found"):
        await bot.send_message(42, "x", reply_to_message_id=99)


async def test_text_limit_counts_utf16_units(bot: Bot) -> None:
    assert (await bot.send_message(1, "a" * 4096)).text == "a" * 4096
    assert utf16_len("😀" * 2048) == 4096
    await bot.send_message(1, "😀" * 2048)
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(1, "😀" * 2049)  # 2049 characters, 4098 UTF-16 units
    await bot.send_message(1, "<b>" + "&amp;" * 4096 + "</b>", parse_mode="HTML")  # tags and escapes are free
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(1, "<b>" + "x" * 4097 + "</b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match="Message text is empty"):
        await bot.send_message(1, "<b> </b>", parse_mode="HTML")


@pytest.mark.parametrize(("markup", "error"), [
    ("<b>bold", 'Can\'t find end tag corresponding to start tag "b"'),
    ("a < b", 'Unsupported start tag "" at byte offset 2'),
    ("<b>x</i>", 'Unmatched end tag at byte offset 4, expected "</b>", found "</i>"'),
    ("<div>x</div>", 'Unsupported start tag "div" at byte offset 0'),
    ("x</b>", "Unexpected end tag at byte offset 1"),
    ("<span>s</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
    ("AT&T", "Character '&' at byte offset 2 must be escaped as &amp;"),
    ("é<br/>", 'Unsupported start tag "br/" at byte offset 2'),  # offsets are UTF-8 bytes
])
async def test_invalid_html_is_refused_like_telegram(bot: Bot, markup: str, error: str) -> None:
    with pytest.raises(BadRequest) as raised:
        await bot.send_message(1, markup, parse_mode="HTML")
    assert raised.value.message == ("Can't parse entities: " + error).capitalize()  # PTB's capitalize()


async def test_valid_nested_html_is_accepted(fake: FakeTelegram, bot: Bot) -> None:
    markup = ('<b>bold <i>both</i></b> <a href="https://example.com/?a=1&amp;b=2">link</a>\n'
              '<pre><code class="language-python">x &lt; 1 &#38; y</code></pre>\n'
              '<blockquote expandable>quote</blockquote> <tg-spoiler>s</tg-spoiler> '
              '<span class="tg-spoiler">t</span> <s>gone</s> <u>under</u> <code>c</code>')
    msg = await bot.send_message(1, markup, parse_mode="HTML")
    assert msg.text == "bold both link\nx < 1 & y\nquote s t gone under c"
    kinds = {(e.type, msg.parse_entity(e)) for e in msg.entities}
    assert {("bold", "bold both"), ("italic", "both"), ("text_link", "link"), ("pre", "x < 1 & y"),
            ("expandable_blockquote", "quote"), ("spoiler", "s"), ("spoiler", "t"), ("strikethrough", "gone"),
            ("underline", "under"), ("code", "c")} <= kinds
    link = next(e for e in msg.entities if e.type == "text_link")
    assert link.url == "https://example.com/?a=1&b=2"
    assert next(e for e in msg.entities if e.type == "pre").language == "python"
    assert fake.sent[0].text == markup and fake.sent[0].plain == msg.text


# TDLib's own parse_html cases (test/message_entities.cpp), on the pure function.
@pytest.mark.parametrize(("markup", "text", "entities"), [
    ("➡️ ➡️<i>➡️ ➡️</i>", "➡️ ➡️➡️ ➡️", [("italic", 5, 5)]),
    ("🏟 🏟<i>🏟 &gt;<b aba   =   caba>&lt;🏟</b></i>", "🏟 🏟🏟 ><🏟", [("italic", 5, 7), ("bold", 9, 3)]),
    ("🏟 🏟&lt;<i>a</    >", "🏟 🏟<a", [("italic", 6, 1)]),
    ("🏟 🏟&lt;<b></b>", "🏟 🏟<", []),
    ("<a href=telegram.org> </a>", " ", [("text_link", 0, 1)]),
    ("<a>telegram.org </a>", "telegram.org ", []),
    ("🏟 🏟&lt;<pre><code class=\"language-fift\">🏟 🏟&lt;</></>", "🏟 🏟<🏟 🏟<", [("pre", 6, 6)]),
    ("<blockquote   cite=\"\" askdlbas nasjdbaj nj12b3>a&lt;<pre  >b;</></>", "a<b;",
     [("blockquote", 0, 4), ("pre", 2, 2)]),
])
def test_parse_html_matches_tdlib(markup: str, text: str, entities: list[tuple[str, int, int]]) -> None:
    plain, found = parse_html(markup)
    assert plain == text
    assert [(e["type"], e["offset"], e["length"]) for e in found] == entities


@pytest.mark.parametrize(("markup", "error"), [
    ("🏟 🏟&lt;<abacaba", "Unclosed start tag at byte offset 13"),
    ("🏟 🏟&lt;<i   =aba>", 'Empty attribute name in the tag "i" at byte offset 13'),
    ("🏟 🏟&lt;<i    aba  =  190azAz-.,", "Unexpected end of name token at byte offset 27"),
    ("🏟 🏟&lt;<i>a</i   ", "Unclosed end tag at byte offset 17"),
    ("&#xDFDF;", "Text contains invalid Unicode characters after decoding HTML entities, "
                 "check for unmatched surrogate code units"),
])
def test_parse_html_errors_match_tdlib(markup: str, error: str) -> None:
    with pytest.raises(EntityParseError) as raised:
        parse_html(markup)
    assert str(raised.value) == error


def test_lenient_html_keeps_unknown_ampersands_like_telegram() -> None:
    assert parse_html("AT&T &ge; &lt", strict=False) == ("AT&T &ge; <", [])


# ----------------------------------------------------------------------------- failures


async def test_injected_failures_surface_as_ptb_errors(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next("sendMessage", retry_after=7)
    with pytest.raises(RetryAfter) as raised:
        await bot.send_message(1, "x")
    assert _seconds(raised.value) == 7
    fake.fail_next("sendMessage", status=400, description="Bad Request: chat not found")
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message(1, "x")
    fake.fail_next("sendMessage", status=403)
    with pytest.raises(Forbidden, match="bot was blocked by the user"):
        await bot.send_message(1, "x")
    fake.fail_next("sendMessage", migrate_to_chat_id=-1001234)
    with pytest.raises(ChatMigrated) as migrated:
        await bot.send_message(-1234, "x")
    assert migrated.value.new_chat_id == -1001234
    fake.fail_next("sendMessage", disconnect=True)
    with pytest.raises(NetworkError):
        await bot.send_message(1, "x")
    fake.fail_next("sendChatAction", retry_after=2, times=2)
    for _ in range(2):
        with pytest.raises(RetryAfter):
            await bot.send_chat_action(1, "typing")
    assert await bot.send_chat_action(1, "typing")  # injections are used up
    assert [s.text for s in fake.sent] == [] and len(fake.actions) == 1
    assert len([c for c in fake.calls if c.method == "sendMessage"]) == 5


async def test_edit_message_text_and_not_modified(fake: FakeTelegram, bot: Bot) -> None:
    msg = await bot.send_message(5, "draft")
    edited = await bot.edit_message_text("draft <b>more</b>", chat_id=5, message_id=msg.message_id,
                                         parse_mode="HTML")
    assert edited.text == "draft more" and edited.edit_date is not None
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_text("draft <b>more</b>", chat_id=5, message_id=msg.message_id, parse_mode="HTML")
    await bot.edit_message_text("draft more", chat_id=5, message_id=msg.message_id)  # entities differ: modified
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await bot.edit_message_text("x", chat_id=5, message_id=99)
    with pytest.raises(BadRequest, match="Message_too_long"):
        await bot.edit_message_text("x" * 4097, chat_id=5, message_id=msg.message_id)
    assert [(e.message_id, e.plain) for e in fake.edits] == [(1, "draft more"), (1, "draft more")]
    assert fake.edits[0].time <= fake.edits[1].time


# ----------------------------------------------------------------------------- updates


async def test_long_poll_returns_an_injected_update_and_offsets_confirm(fake: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=5))
    await fake.wait_for_calls("getUpdates")
    started = time.monotonic()
    update = fake.push(fake.message(42, "/start@chatgate_bot hello"))
    updates = await poll
    assert time.monotonic() - started < 1.0
    assert [u.update_id for u in updates] == [update["update_id"]]
    message = updates[0].message
    assert message is not None and message.text == "/start@chatgate_bot hello"
    assert message.entities[0].type == "bot_command" and message.entities[0].length == 19
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [update["update_id"]]  # not confirmed
    assert await bot.get_updates(offset=update["update_id"] + 1, timeout=0) == ()
    started = time.monotonic()
    assert await bot.get_updates(offset=update["update_id"] + 1, timeout=0.3) == ()  # held, then empty
    assert 0.25 < time.monotonic() - started < 1.0
    assert fake.pending == [] and len(fake.get_updates_calls) == 4


async def test_redeliver_repeats_an_update_once(fake: FakeTelegram, bot: Bot) -> None:
    update = fake.push(fake.message(42, "once"))
    first = await bot.get_updates(timeout=0)
    offset = first[-1].update_id + 1
    assert await bot.get_updates(offset=offset, timeout=0) == ()
    fake.redeliver(update)
    again = await bot.get_updates(offset=offset, timeout=0)
    assert [u.update_id for u in again] == [update["update_id"]]
    assert await bot.get_updates(offset=offset, timeout=0) == ()


async def test_application_polling_receives_and_answers(fake: FakeTelegram) -> None:
    seen: list[int] = []

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        seen.append(update.update_id)
        await update.effective_message.reply_text("echo: " + (update.effective_message.text or ""))

    app = _app(fake)
    app.add_handler(MessageHandler(filters.TEXT, echo))
    update = fake.push(fake.message(42, "hello"))
    async with app:
        await app.start()
        await app.updater.start_polling(timeout=1, poll_interval=0)  # type: ignore[union-attr]
        sent = await fake.wait_for_sent(1)
        fake.redeliver(update)  # as after a restart with an unconfirmed offset: PTB runs it again
        await fake.wait_for_sent(2)
        await app.updater.stop()  # type: ignore[union-attr]
        await app.stop()
    assert (sent[0].chat_id, sent[0].text) == (42, "echo: hello")
    assert seen == [update["update_id"]] * 2
    assert fake.calls[0].method == "getMe" and fake.get_updates_calls[0].time >= fake.calls[0].time
    assert fake.pending == []  # PTB confirmed the offset on stop


async def test_allowed_updates_drop_other_kinds(fake: FakeTelegram, bot: Bot) -> None:
    fake.push(fake.message(42, "fixed", edited=True, message_id=1))
    kept = fake.push(fake.message(42, "new"))
    updates = await bot.get_updates(timeout=0, allowed_updates=["message"])
    assert [u.update_id for u in updates] == [kept["update_id"]]
    assert len(fake.pending) == 1  # the edit was dropped, as Telegram drops unwanted kinds


async def test_conflicts(fake: FakeTelegram, bot: Bot) -> None:
    older = asyncio.create_task(bot.get_updates(timeout=5))
    await fake.wait_for_calls("getUpdates")
    async with Bot(fake.token, base_url=fake.base_url) as second_instance:
        newer = asyncio.create_task(second_instance.get_updates(timeout=0.1))
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await older
        assert await newer == ()
    fake.conflict = True
    with pytest.raises(Conflict, match="only one bot instance"):
        await bot.get_updates(timeout=0)


async def test_webhook_blocks_get_updates(fake: FakeTelegram, bot: Bot) -> None:
    assert await bot.set_webhook("https://bot.example/hook", secret_token="s3cret", allowed_updates=["message"])
    info = await bot.get_webhook_info()
    assert info.url == "https://bot.example/hook" and info.allowed_updates == ("message",)
    with pytest.raises(Conflict, match="while webhook is active"):
        await bot.get_updates(timeout=0)
    with pytest.raises(BadRequest, match="unallowed characters"):
        await bot.set_webhook("https://bot.example/hook", secret_token="no spaces")
    assert await bot.delete_webhook()
    assert (await bot.get_webhook_info()).url == "" and await bot.get_updates(timeout=0) == ()


async def test_webhook_delivery_to_ptb_with_secret(fake: FakeTelegram) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    received: list[str] = []

    async def record(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        received.append(update.effective_message.text or "")  # type: ignore[union-attr]

    app = _app(fake)
    app.add_handler(MessageHandler(filters.TEXT, record))
    async with app:
        await app.start()
        await app.updater.start_webhook(  # type: ignore[union-attr]
            listen="127.0.0.1", port=port, url_path="hook", secret_token="s3cret",
            webhook_url=f"http://127.0.0.1:{port}/hook")
        assert fake.webhook is not None and fake.webhook.secret_token == "s3cret"
        assert await fake.post_webhook_update(fake.message(42, "via webhook")) == 200
        assert await fake.post_webhook_update(fake.message(42, "forged"), secret="wrong") == 403
        assert await fake.post_webhook_update(fake.message(42, "no header"), secret=None) == 403
        await fake.wait_for(lambda: received)
        await app.updater.stop()  # type: ignore[union-attr]
        await app.stop()
    assert received == ["via webhook"]


def test_message_builder_shapes() -> None:
    tg = FakeTelegram()
    dm = tg.message(42, "😀 hi @someone_else /help")
    msg = dm["message"]
    assert msg["chat"] == {"id": 42, "type": "private", "first_name": "Alice"} and msg["from"]["id"] == 42
    assert [(e["type"], e["offset"], e["length"]) for e in msg["entities"]] == \
        [("mention", 6, 13), ("bot_command", 20, 5)]  # the emoji counts two UTF-16 units
    topic = tg.message(-1001, "in a topic", is_forum=True, message_thread_id=3, user_id=7, username="bob_b")
    parsed = Update.de_json(topic, None)
    assert parsed.message is not None and parsed.message.is_topic_message and parsed.message.chat.is_forum
    assert parsed.message.from_user.username == "bob_b" and parsed.update_id == dm["update_id"] + 1
    photo = tg.message(-5, caption="look", photo=[{"file_id": "PHOTO-1", "file_size": 3}], media_group_id="g1")
    assert photo["message"]["chat"]["type"] == "group" and photo["message"]["photo"][0]["width"] == 320
    edited = tg.message(42, "fixed", edited=True, message_id=1)
    assert "edited_message" in edited and edited["edited_message"]["message_id"] == 1
    post = tg.message(-100777, "news", channel_post=True)
    assert post["channel_post"]["sender_chat"]["type"] == "channel" and "from" not in post["channel_post"]
    joined = Update.de_json(tg.message(-5, new_chat_members=[tg.bot_user]), None).message
    assert joined is not None and joined.new_chat_members[0].username == "chatgate_bot"
    assert detect_entities("/tmp/x not a command") == []


# ----------------------------------------------------------------------------- files, commands, actions


async def test_file_upload_and_download_round_trip(fake: FakeTelegram, bot: Bot) -> None:
    data = b"report \x00\xff bytes"
    msg = await bot.send_document(42, InputFile(data, filename="report.txt"), caption="<b>the</b> report",
                                  parse_mode="HTML")
    assert msg.caption == "the report" and msg.document is not None and msg.document.file_name == "report.txt"
    assert fake.documents[0].data == data and fake.documents[0].filename == "report.txt"
    assert fake.sent[0].method == "sendDocument" and fake.sent[0].plain == "the report"
    downloaded = await (await bot.get_file(msg.document.file_id)).download_as_bytearray()
    assert bytes(downloaded) == data
    fake.add_file("VOICE-1", b"OggS...", file_path="voice/file_9.oga")
    voice = await bot.get_file("VOICE-1")
    assert voice.file_path == f"{fake.base_file_url}{fake.token}/voice/file_9.oga"
    assert bytes(await voice.download_as_bytearray()) == b"OggS..."
    with pytest.raises(BadRequest, match="Invalid file_id"):
        await bot.get_file("nope")
    photo = await bot.send_photo(42, InputFile(b"\x89PNG fake", filename="chart.png"), caption="chart")
    assert photo.photo and photo.caption == "chart" and fake.documents[-1].method == "sendPhoto"
    assert bytes(await (await bot.get_file(photo.photo[-1].file_id)).download_as_bytearray()) == b"\x89PNG fake"


async def test_commands_and_chat_actions(fake: FakeTelegram, bot: Bot) -> None:
    assert await bot.set_my_commands([BotCommand("new", "Start over"), BotCommand("stop", "Stop the run")])
    assert [c.command for c in await bot.get_my_commands()] == ["new", "stop"]
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await bot.set_my_commands([BotCommand("Stop", "uppercase is refused")])
    assert await bot.delete_my_commands() and await bot.get_my_commands() == ()
    assert [c.method for c in fake.commands_calls] == ["setMyCommands", "getMyCommands", "deleteMyCommands",
                                                        "getMyCommands"]
    assert fake.commands_calls[0].commands == (("new", "Start over"), ("stop", "Stop the run"))
    await bot.send_chat_action(-100, "typing", message_thread_id=4)
    with pytest.raises(BadRequest, match="Wrong parameter action"):
        await bot.send_chat_action(-100, "dancing")
    assert [(a.chat_id, a.action, a.thread_id) for a in fake.actions] == [(-100, "typing", 4)]


async def test_message_reaction_set_and_removed(fake: FakeTelegram, bot: Bot) -> None:
    fake.push(fake.message(7, "hello", message_id=3))
    assert await bot.set_message_reaction(7, 3, "\N{EYES}")
    assert fake.reactions[(7, 3)] == [{"type": "emoji", "emoji": "\N{EYES}"}]
    assert await bot.set_message_reaction(7, 3, [])  # takes it away
    assert fake.reactions[(7, 3)] == []
    with pytest.raises(BadRequest, match="Message to react not found"):
        await bot.set_message_reaction(7, 99, "\N{EYES}")
    with pytest.raises(BadRequest, match="Reactions_too_many"):
        await bot.set_message_reaction(7, 3, ["\N{EYES}", "\N{THUMBS UP SIGN}"])


# ----------------------------------------------------------------------------- standalone use


async def test_control_api(fake: FakeTelegram, bot: Bot) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{fake.api_root}/_control/push", json={"chat_id": 9, "text": "from bench"}) as r:
            pushed = (await r.json())["result"]
        updates = await bot.get_updates(timeout=1)
        assert [u.update_id for u in updates] == [pushed["update_id"]]
        await bot.send_message(9, "one")
        await bot.send_message(9, "two")
        async with http.get(f"{fake.api_root}/_control/sent", params={"since": 1}) as r:
            assert [s["text"] for s in (await r.json())["result"]] == ["two"]
        async with http.get(f"{fake.api_root}/_control/calls", params={"method": "getUpdates"}) as r:
            assert len((await r.json())["result"]) == 1


def test_standalone_server_starts_and_answers() -> None:
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen([sys.executable, "-m", "tests.fakes.telegram_server", "--port", "0"], cwd=root,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        api_root = process.stdout.readline().strip()
        with urllib.request.urlopen(f"{api_root}/bot123456:TEST-TOKEN/getMe", timeout=2) as response:
            assert json.load(response)["result"]["username"] == "chatgate_bot"
    finally:
        process.terminate()
        process.wait(timeout=5)
