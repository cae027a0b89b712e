"""The Telegram channel end to end: the real python-telegram-bot against the fake Bot API,
the real OpenAI SDK against the fake LLM, the whole App in between."""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.telegram.channel import TelegramChannel, secret_matches
from adapters.telegram.config import TelegramConfig
from bot.app import App
from bot.channels import SendFailed
from bot.errors import ChannelError
from bot.settings import load_config
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_html import utf16_len
from tests.fakes.telegram_server import FakeTelegram

GROUP = -1001234567890
BOT_ID = 123456


class Stack:
    def __init__(self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
        self.tmp_path, self.llm, self.tg = tmp_path, llm, tg
        self.apps: list[App] = []

    async def start(self, telegram: str = "", *, access: str = "dm_policy: open, group_policy: open", top: str = "",
                    **settings: object) -> App:
        """``telegram``: more keys of channels.telegram; ``access``: its policy keys; ``top``: more
        top-level config lines."""
        path = self.tmp_path / "config.yaml"
        path.write_text(f"""{top}
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}"}}}}
storage: {{path: "{self.tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp_path / 'workspaces'}"}}
channels:
  telegram: {{enabled: true, token: "{self.tg.token}", base_url: "{self.tg.api_root}",
              {access} {', ' + telegram if telegram else ''}}}
""")
        config = load_config(path, env={})
        channel = TelegramChannel(config.channels.telegram, **settings)  # type: ignore[arg-type]
        app = App(config, {"telegram": channel})
        await app.__aenter__()
        self.apps.append(app)
        return app

    async def stop(self) -> None:
        while self.apps:
            await self.apps.pop().__aexit__(None, None, None)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        s = Stack(tmp_path, llm, tg)
        try:
            yield s
        finally:
            await s.stop()


def llm_text(llm: FakeLLM, index: int = -1) -> str:
    return json.dumps(llm.requests[index].body["messages"])


async def test_dm_is_answered(stack: Stack) -> None:
    await stack.start()
    stack.tg.push(stack.tg.message(42, "hello there", user_id=42))
    (sent,) = await stack.tg.wait_for_sent(1, timeout=5)
    assert sent.chat_id == 42 and sent.plain == "echo: hello there" and sent.parse_mode == "HTML"
    assert sent.reply_to is None  # DMs are not threaded as replies


async def test_group_needs_a_mention_and_gets_a_reply(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    tg.push(tg.message(GROUP, "just chatting", user_id=7))
    trigger = tg.push(tg.message(GROUP, "@chatgate_bot what time is it?", user_id=8))
    (sent,) = await tg.wait_for_sent(1, timeout=5)
    assert sent.reply_to == trigger["message"]["message_id"]
    assert "what time is it?" in sent.plain and "@chatgate_bot" not in llm_text(stack.llm)
    assert "just chatting" in llm_text(stack.llm)  # the unaddressed message came along as context
    await asyncio.sleep(0.2)
    assert len(stack.llm.requests) == 1


async def test_a_reply_to_the_bot_addresses_it(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    tg.push(tg.message(GROUP, "@chatgate_bot hi", user_id=8))
    (first,) = await tg.wait_for_sent(1, timeout=5)
    tg.push(tg.message(GROUP, "and another thing", user_id=8, reply_to_message=first.message))
    await tg.wait_for_sent(2, timeout=5)
    assert tg.sent[1].plain.endswith('from "Alice" (id telegram:8):\n\nand another thing')  # senders are named in groups


async def test_commands_for_this_bot_and_for_another(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    tg.push(tg.message(GROUP, "/stop@otherbot", user_id=8))
    tg.push(tg.message(GROUP, "/stop@chatgate_bot", user_id=8))
    (sent,) = await tg.wait_for_sent(1, timeout=5)
    assert sent.plain == "Nothing is running."
    await asyncio.sleep(0.2)
    assert len(tg.sent) == 1 and not stack.llm.requests


async def test_stop_mid_answer_stops_typing_and_the_stream(stack: Stack) -> None:
    await stack.start()
    tg, llm = stack.tg, stack.llm
    llm.script(Reply.hang())
    tg.push(tg.message(42, "write an essay", user_id=42))
    await llm.wait_for_requests(1, timeout=5)
    await tg.wait_for(lambda: tg.actions, timeout=5)
    tg.push(tg.message(42, "/stop", user_id=42))
    (sent,) = await tg.wait_for_sent(1, timeout=5)
    assert sent.plain == "Stopped."
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 2)
    await asyncio.sleep(0.3)  # a typing request already in flight may still land
    typing = len(tg.actions)
    await asyncio.sleep(4.5)
    assert len(tg.actions) == typing  # no more "typing…" after /stop


async def test_topics_stay_in_their_topic(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    tg.push(tg.message(GROUP, "@chatgate_bot in a topic", user_id=8, is_forum=True, message_thread_id=5,
                       is_topic_message=True))
    tg.push(tg.message(GROUP, "@chatgate_bot in general", user_id=9, is_forum=True))
    await tg.wait_for_sent(2, timeout=5)
    by_text = {(s.plain or "").rsplit("\n", 1)[-1]: s for s in tg.sent}
    assert by_text["in a topic"].thread_id == 5
    assert by_text["in general"].thread_id is None


async def test_a_long_code_heavy_answer_arrives_whole(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    block = "```python\n" + "\n".join(f"print('line {i} 😀 <tag> & more')" for i in range(120)) + "\n```\n\n"
    answer = ("Here is **the** plan 😀.\n\n" + block) * 4  # ~24,000 characters, code blocks over the limit
    stack.llm.script(Reply.text(answer, chunk_size=500))
    tg.push(tg.message(42, "show me", user_id=42))
    await tg.wait_for(lambda: len(tg.sent) >= 2, timeout=10)
    await asyncio.sleep(0.5)
    texts = [s.plain or "" for s in tg.sent]
    assert all(utf16_len(t) <= 4096 for t in texts) and 2 <= len(texts) <= 8
    whole = "".join(texts)
    assert whole.count("😀") == answer.count("😀") and whole.count("<tag> & more") == 480
    assert all("<pre>" in (s.text or "") for s in tg.sent[1:])  # split code blocks are closed and reopened


async def test_a_huge_answer_is_sent_as_a_file(stack: Stack) -> None:
    await stack.start()
    answer = "Summary first.\n\n" + "".join(f"{i}: " + "lorem ipsum dolor sit amet " * 40 + "\n\n"
                                              for i in range(60))  # > 8 chunks
    stack.llm.script(Reply.text(answer, chunk_size=5000))
    stack.tg.push(stack.tg.message(42, "everything", user_id=42))
    await stack.tg.wait_for(lambda: stack.tg.documents, timeout=10)
    (doc,) = stack.tg.documents
    assert doc.filename == "answer.md" and doc.data.decode() == answer.strip()
    assert len(stack.tg.sent) == 2 and "Summary first." in (stack.tg.sent[0].plain or "")


async def test_unparseable_html_is_resent_as_plain_text(stack: Stack) -> None:
    await stack.start()
    stack.tg.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: oops")
    stack.llm.script(Reply.text("**bold** answer"))
    stack.tg.push(stack.tg.message(42, "hi", user_id=42))
    await stack.tg.wait_for_sent(1, timeout=5)
    (sent,) = stack.tg.sent
    assert sent.parse_mode is None and sent.text == "bold answer"


async def test_no_reply_sends_nothing_and_stops_typing(stack: Stack) -> None:
    await stack.start()
    stack.llm.script(Reply.text("NO_REPLY", chunk_size=1))
    stack.tg.push(stack.tg.message(GROUP, "@chatgate_bot psst", user_id=8))
    await stack.llm.wait_for_requests(1, timeout=5)
    await asyncio.sleep(0.5)
    typing = len(stack.tg.actions)
    await asyncio.sleep(4.5)
    assert stack.tg.sent == [] and stack.tg.edits == [] and len(stack.tg.actions) == typing


async def test_429_is_honoured(stack: Stack) -> None:
    await stack.start()
    stack.tg.fail_next("sendMessage", retry_after=1)
    stack.tg.push(stack.tg.message(42, "hi", user_id=42))
    await stack.tg.wait_for_sent(1, timeout=5)
    tries = [c for c in stack.tg.calls if c.method == "sendMessage"]
    assert len(tries) == 2 and tries[1].time - tries[0].time >= 0.95
    assert len(stack.tg.sent) == 1


async def test_streaming_edits_end_in_exactly_one_copy(stack: Stack) -> None:
    await stack.start("streaming: edit")
    answer = " ".join(f"word{i}" for i in range(60))
    stack.llm.script(Reply.text(answer, chunk_size=8, delay=0.05))  # ~2.5 s of streaming
    stack.tg.push(stack.tg.message(42, "stream it", user_id=42))
    await stack.tg.wait_for(lambda: any(e.plain == answer for e in stack.tg.edits), timeout=10)
    await asyncio.sleep(0.3)
    assert len(stack.tg.sent) == 1  # the draft; the answer is its last edit, not a second message
    assert stack.tg.sent[0].plain != answer
    times = [stack.tg.sent[0].time] + [e.time for e in stack.tg.edits]
    assert all(b - a >= 0.95 for a, b in zip(times, times[1:], strict=False))  # at most one edit a second


async def test_webhook_checks_the_secret(stack: Stack, unused_tcp_port: int) -> None:
    await stack.start(f'mode: webhook, webhook: {{listen: 127.0.0.1, port: {unused_tcp_port}, path: /tg, '
                      f'url: "https://127.0.0.1:{unused_tcp_port}/tg", secret_token: s3cret-token}}')
    tg = stack.tg
    assert tg.webhook is not None and tg.webhook.secret_token == "s3cret-token"
    assert await tg.post_webhook_update(tg.message(42, "intruder", user_id=42), secret="wrong") == 403
    assert await tg.post_webhook_update(tg.message(42, "friend", user_id=42)) == 200
    (sent,) = await tg.wait_for_sent(1, timeout=5)
    assert sent.plain == "echo: friend" and len(stack.llm.requests) == 1


async def test_webhook_compares_the_secret_in_constant_time(stack: Stack, unused_tcp_port: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    compared: list[tuple[object, object]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    await stack.start(f'mode: webhook, webhook: {{listen: 127.0.0.1, port: {unused_tcp_port}, path: /tg, '
                      f'url: "https://127.0.0.1:{unused_tcp_port}/tg", secret_token: s3cret-token}}')
    tg = stack.tg
    for wrong in ("s3cret-tokeN", "s3cret", "s3cret-token-and-more", None):  # same length, shorter, longer, none
        assert await tg.post_webhook_update(tg.message(42, "intruder", user_id=42), secret=wrong) == 403
    assert await tg.post_webhook_update(tg.message(42, "friend", user_id=42)) == 200
    assert compared == [(w.encode(), b"s3cret-token") for w in ("s3cret-tokeN", "s3cret", "s3cret-token-and-more",
                                                                "s3cret-token")]  # fmt: skip
    (sent,) = await tg.wait_for_sent(1, timeout=5)
    assert sent.plain == "echo: friend" and len(stack.llm.requests) == 1


@pytest.mark.parametrize(("sent", "ok"), [
    ("s3cret-token", True), ("s3cret-tokeN", False), ("s3cret", False), ("s3cret-token-", False), ("", False),
    (None, False), ("s3cret-tok\u00e9n", False), ("s3cret-tok\udce9n", False),  # non-ASCII: refused, never raises
])  # fmt: skip
def test_secret_matches(sent: str | None, ok: bool) -> None:
    assert secret_matches(sent, "s3cret-token") is ok


async def test_a_user_posting_as_many_channels_shares_one_rate_per_group(stack: Stack) -> None:
    await stack.start(top="limits: {messages_per_minute: 3}\nruns: {queue_mode: followup, debounce_ms: 0}")
    tg = stack.tg
    for channel in range(1, 6):  # one person, five of their channels, each a "new" sender
        tg.push(tg.message(GROUP, f"@chatgate_bot note {channel}", as_channel=-1_005_000_000_000 - channel))
    await tg.wait_for(lambda: any("faster than I can take them" in (s.plain or "") for s in tg.sent), timeout=10)
    await tg.wait_for(lambda: sum((s.plain or "").startswith("echo:") for s in tg.sent) == 3, timeout=10)
    tg.push(tg.message(GROUP, "@chatgate_bot a member of the group", user_id=8))  # people have their own rate
    await tg.wait_for(lambda: any("a member of the group" in (s.plain or "") for s in tg.sent), timeout=10)
    await asyncio.sleep(0.3)
    asked = json.dumps([r.body["messages"][-1] for r in stack.llm.requests])
    assert all(f"note {n}" in asked for n in (1, 2, 3)) and "note 4" not in asked and "note 5" not in asked
    assert sum("faster than I can take them" in (s.plain or "") for s in tg.sent) == 1  # once, then quietly


async def test_a_photo_reaches_the_model_as_an_image(stack: Stack) -> None:
    await stack.start()
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    stack.tg.add_file("PHOTO-1", png, file_path="photos/p.jpg")
    photo = [{"file_id": "PHOTO-1", "file_unique_id": "u1", "width": 90, "height": 90, "file_size": len(png)}]
    stack.tg.push(stack.tg.message(42, None, user_id=42, photo=photo, caption="what is this?"))
    await stack.tg.wait_for_sent(1, timeout=5)
    content = stack.llm.requests[0].body["messages"][-1]["content"]
    kinds = [part["type"] for part in content]
    assert kinds == ["text", "image_url", "text"] and content[0]["text"] == "what is this?"
    assert "chatgate-context" in content[2]["text"]  # the runtime context, after the cached prefix
    assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


async def test_documents_are_saved_and_big_files_refused(stack: Stack, tmp_path: Path) -> None:
    await stack.start("max_download_mb: 1")
    tg = stack.tg
    tg.add_file("DOC-1", b"quarterly numbers", file_path="documents/r.txt")
    tg.push(tg.message(42, None, user_id=42, caption="read this",
                       document={"file_id": "DOC-1", "file_unique_id": "d1", "file_name": "report.txt",
                                 "mime_type": "text/plain", "file_size": 17}))
    await tg.wait_for_sent(1, timeout=5)
    assert (tmp_path / "workspaces" / "telegram-42" / "inbox" / "report.txt").read_bytes() == b"quarterly numbers"
    assert "inbox/report.txt" in llm_text(stack.llm)
    tg.push(tg.message(42, None, user_id=42, document={"file_id": "DOC-2", "file_unique_id": "d2",
                                                       "file_name": "huge.zip", "file_size": 5 * 1024 * 1024}))
    await tg.wait_for_sent(2, timeout=5)
    assert "up to 1 MB" in (tg.sent[1].plain or "") and len(stack.llm.requests) == 1


async def test_a_redelivered_update_runs_once(stack: Stack) -> None:
    await stack.start()
    update = stack.tg.push(stack.tg.message(42, "once", user_id=42))
    await stack.tg.wait_for_sent(1, timeout=5)
    await stack.stop()
    stack.tg.redeliver(update)  # as after a restart with an unconfirmed offset
    await stack.start()
    await stack.tg.wait_for(lambda: not stack.tg.pending, timeout=5)
    await asyncio.sleep(0.3)
    assert len(stack.tg.sent) == 1 and len(stack.llm.requests) == 1


async def test_commands_are_registered_only_when_they_changed(stack: Stack) -> None:
    await stack.start()
    await stack.stop()
    await stack.start()
    sets = [c for c in stack.tg.commands_calls if c.method == "setMyCommands"]
    assert len(sets) == 1 and ("stop", "Stop the current answer") in sets[0].commands


async def test_a_blocked_user_is_logged_once_and_nothing_breaks(stack: Stack, caplog) -> None:  # type: ignore[no-untyped-def]
    await stack.start()
    stack.tg.fail_next("sendMessage", status=403, times=2)
    stack.tg.push(stack.tg.message(42, "one", user_id=42))
    stack.tg.push(stack.tg.message(42, "two", user_id=42))
    await stack.llm.wait_for_requests(2, timeout=5)
    await asyncio.sleep(0.5)
    assert caplog.text.count("refuses to deliver to chat 42") == 1


async def test_a_migrated_group_is_followed(stack: Stack) -> None:
    await stack.start()
    stack.tg.fail_next("sendMessage", migrate_to_chat_id=-100999)
    stack.tg.push(stack.tg.message(-555, "@chatgate_bot hi", user_id=8, chat_type="group"))
    (sent,) = await stack.tg.wait_for_sent(1, timeout=5)
    assert sent.chat_id == -100999


async def test_conflict_and_bad_token_stop_the_channel_with_one_line(stack: Stack) -> None:
    app = await stack.start()
    stack.tg.conflict = True
    with pytest.raises(ChannelError, match="another program is polling"):
        await asyncio.wait_for(app.channels["telegram"].wait_closed(), 40)
    calls = len([c for c in stack.tg.calls if c.method == "getUpdates"])
    await asyncio.sleep(0.5)
    assert len([c for c in stack.tg.calls if c.method == "getUpdates"]) == calls  # no retry storm
    bad = TelegramChannel(TelegramConfig(token="999:WRONG", base_url=stack.tg.api_root))
    with pytest.raises(ChannelError, match="refused the token"):
        await bad.start(lambda msg: asyncio.sleep(0))


async def test_an_album_arrives_as_one_message(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    for i in (1, 2):
        tg.add_file(f"ALB-{i}", b"\xff\xd8jpeg" + bytes([i]), file_path=f"photos/{i}.jpg")
        photo = [{"file_id": f"ALB-{i}", "file_unique_id": f"a{i}", "width": 9, "height": 9, "file_size": 6}]
        tg.push(tg.message(42, None, user_id=42, photo=photo, media_group_id="album-7",
                           caption="compare these" if i == 1 else None))
    await tg.wait_for_sent(1, timeout=5)
    await asyncio.sleep(0.3)
    assert len(stack.llm.requests) == 1
    content = stack.llm.requests[0].body["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "image_url", "text"]
    assert content[0]["text"] == "compare these"


async def test_edits_service_messages_and_channel_posts_are_ignored(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    tg.push(tg.message(42, "edited text", user_id=42, edited=True))
    tg.push(tg.message(GROUP, None, user_id=8, new_chat_members=[{"id": 9, "is_bot": False, "first_name": "Bo"}]))
    tg.push(tg.message(-100777, "a channel post", channel_post=True))
    tg.push(tg.message(42, "a real one", user_id=42))
    (sent,) = await tg.wait_for_sent(1, timeout=5)
    await asyncio.sleep(0.3)
    assert sent.plain == "echo: a real one" and len(stack.llm.requests) == 1


async def test_a_send_retried_after_a_failure_mid_answer_sends_no_chunk_twice(stack: Stack) -> None:
    app = await stack.start()
    tg = stack.tg
    channel = app.channels["telegram"]
    real, calls = channel.send, []

    async def second_one_fails_once(to, text):  # type: ignore[no-untyped-def]
        calls.append(text)
        if len(calls) == 2:
            raise SendFailed("Something odd")  # delivery retries from the chunk that failed
        return await real(to, text)

    channel.send = second_one_fails_once  # type: ignore[method-assign]
    answer = "\n\n".join(f"Paragraph {i}: " + "words " * 300 for i in range(4))  # ~7,000 chars: 2 chunks
    stack.llm.script(Reply.text(answer, chunk_size=2000))
    tg.push(tg.message(42, "long please", user_id=42))
    await tg.wait_for(lambda: len(tg.sent) >= 2, timeout=10)
    await asyncio.sleep(1.5)
    plains = [s.plain or "" for s in tg.sent]
    assert len(plains) == 2 and plains[0].startswith("Paragraph 0") and "Paragraph 3" in plains[1]
    assert len(calls) == 3  # chunk 1, chunk 2 (failed), chunk 2 again: chunk 1 was not repeated


async def test_a_poll_that_goes_silent_is_abandoned_and_polling_goes_on(stack: Stack, caplog) -> None:  # type: ignore[no-untyped-def]
    await stack.start(poll_timeout=1, watchdog_grace=1.0)
    await stack.tg.wait_for_calls("getUpdates", 1, timeout=5)
    stack.tg.fail_next("getUpdates", status=200, delay=30)  # the next poll hangs without an answer
    await asyncio.sleep(1.2)
    stack.tg.push(stack.tg.message(42, "still there?", user_id=42))
    (sent,) = await stack.tg.wait_for_sent(1, timeout=8)
    assert sent.plain == "echo: still there?" and "went silent" in caplog.text


async def test_an_anonymous_admin_is_a_person_not_a_bot(stack: Stack) -> None:
    await stack.start()
    tg = stack.tg
    tg.push(tg.message(GROUP, "@chatgate_bot hello from the admins", anonymous_admin=True))
    (sent,) = await tg.wait_for_sent(1, timeout=5)
    assert "hello from the admins" in (sent.plain or "")
    user = stack.llm.requests[0].body["messages"][-1]["content"]
    assert f"telegram:{GROUP}" in json.dumps(user)  # the group speaks, not the placeholder bot



# -- pairing (dm_policy: pairing) -----------------------------------------------------------

CODE = re.compile(r"approve ([A-Z0-9]{8}) ")


def code_in(text: str | None) -> str:
    found = CODE.search(text or "")
    assert found, text
    return found.group(1)


async def test_throwaway_accounts_cannot_push_out_a_waiting_pairing_code(stack: Stack) -> None:
    app = await stack.start(access="dm_policy: pairing")
    tg = stack.tg
    tg.push(tg.message(42, "hello", user_id=42))
    (first,) = await tg.wait_for_sent(1, timeout=5)
    legit = code_in(first.plain)
    for n, user in enumerate((501, 502, 503), start=2):  # cap + 1 throwaway accounts (the cap is 3)
        tg.push(tg.message(user, "hi", user_id=user))
        await tg.wait_for_sent(n, timeout=5)
    assert [s.chat_id for s in tg.sent] == [42, 501, 502, 503]
    assert code_in(tg.sent[1].plain) != code_in(tg.sent[2].plain)
    late = tg.sent[3].plain or ""
    assert "try again later" in late and "approve" not in late  # told to wait, no code, nobody dropped
    assert [c.user_id for c in await app.store.pending_pairings(time.time())] == ["42", "501", "502"]

    assert await app.store.approve_pairing(legit, time.time()) is not None  # what `chatgate pairing approve` does
    tg.push(tg.message(42, "let me in", user_id=42))
    await tg.wait_for_sent(5, timeout=5)
    assert tg.sent[4].chat_id == 42 and tg.sent[4].plain == "echo: let me in"
    tg.push(tg.message(503, "now?", user_id=503))  # there is room again: the code is sent at once
    await tg.wait_for_sent(6, timeout=5)
    assert tg.sent[5].chat_id == 503
    assert await app.store.approve_pairing(code_in(tg.sent[5].plain), time.time()) is not None


async def test_a_reissued_pairing_code_is_sent_to_its_sender(stack: Stack) -> None:
    app = await stack.start(access="dm_policy: pairing")
    tg = stack.tg
    tg.push(tg.message(42, "hello", user_id=42))
    (first,) = await tg.wait_for_sent(1, timeout=5)
    assert await app.store.approve_pairing(code_in(first.plain), time.time()) is not None
    assert await app.store.revoke_sender("telegram", "42")
    tg.push(tg.message(42, "hello again", user_id=42))  # within the hour of the first code
    await tg.wait_for_sent(2, timeout=5)
    again = tg.sent[1].plain or ""
    assert again.startswith("Your earlier code is no longer valid.") and code_in(again) != code_in(first.plain)
    assert await app.store.approve_pairing(code_in(again), time.time()) is not None


def test_the_sdk_loads_without_passports_cryptography() -> None:
    """``build`` loads python-telegram-bot without ``cryptography`` (Passport's, never used: 7.6 MB),
    which stays importable for anything else."""
    code = ("import sys; from adapters.telegram import SPEC; from adapters.telegram.config import TelegramConfig; "
            "SPEC.build(TelegramConfig(enabled=True, token='1:x')); "
            "assert 'cryptography' not in sys.modules and 'telegram' in sys.modules, sorted(sys.modules)[:5]; "
            "from telegram._passport.credentials import CRYPTO_INSTALLED; assert not CRYPTO_INSTALLED; "
            "import cryptography.hazmat.primitives.ciphers")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=Path(__file__).parent.parent)
