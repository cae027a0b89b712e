"""The Slack channel end to end: the real slack-bolt and slack_sdk against the fake Slack,
the real OpenAI SDK against the fake LLM, the whole App in between."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.channel import SlackChannel
from adapters.slack.dialect import SLACK
from bot.app import App
from bot.settings import load_config
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack, Post

pytestmark = pytest.mark.timeout(30)
STREAMING = Reply.text("word " * 400, delay=0.02)  # ~8 s of answer


class Stack:
    def __init__(self, tmp_path: Path, llm: FakeLLM, slack: FakeSlack) -> None:
        self.tmp_path, self.llm, self.slack = tmp_path, llm, slack
        self.apps: list[App] = []
        self.channel: SlackChannel | None = None
        self.mode = "socket"

    async def start(self, mode: str = "socket", streaming: str = "off",
                    keys: str = "dm_policy: open, group_policy: open", **settings: Any) -> App:
        self.mode = mode
        s = self.slack
        path = self.tmp_path / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}"}}}}
storage: {{path: "{self.tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp_path / 'workspaces'}"}}
channels:
  console: {{enabled: false}}
  slack: {{enabled: true, mode: {mode}, bot_token: "{s.bot_token}", app_token: "{s.app_token}",
           signing_secret: "{s.signing_secret}", base_url: "{s.base_url}",
           http: {{listen: 127.0.0.1, port: 0}}, streaming: "{streaming}", {keys}}}
""")
        config = load_config(path, env={})
        self.channel = SlackChannel(config.channels.slack, SLACK, **settings)  # type: ignore[attr-defined]
        app = App(config, {"slack": self.channel})
        await app.__aenter__()
        self.apps.append(app)
        return app

    async def send(self, payload: dict[str, Any], **kw: Any) -> None:
        """Into the bot the way the mode does it, and wait for the ack / the HTTP answer."""
        if self.mode == "socket":
            await self.slack.wait_for_ack(await self.slack.push(payload, retry_attempt=kw.get("retry_num") or 0))
        else:
            assert self.channel is not None
            status, _ = await self.slack.post_event(f"http://127.0.0.1:{self.channel.port}/slack/events", payload,
                                                    **kw)
            assert status == 200

    async def stop(self) -> None:
        while self.apps:
            await self.apps.pop().__aexit__(None, None, None)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with FakeLLM() as llm, FakeSlack() as slack:
        s = Stack(tmp_path, llm, slack)
        try:
            yield s
        finally:
            await s.stop()


def answers(slack: FakeSlack, channel: str) -> list[Post]:
    return [p for p in slack.posts if p.method == "chat.postMessage" and p.channel == channel]


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_dm_is_answered(stack: Stack, mode: str) -> None:
    await stack.start(mode)
    await stack.send(stack.slack.event(stack.slack.message("D1", "hello there")))
    [post] = await stack.slack.wait_for_posts(1)
    assert (post.channel, post.text, post.thread_ts) == ("D1", "echo: hello there", None)


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_mention_answered_in_its_thread_with_reactions(stack: Stack, mode: str) -> None:
    await stack.start(mode)
    s = stack.slack
    mention = s.message("C1", "<@UBOT> what is 2+2?", kind="app_mention")
    await stack.send(s.event(mention))
    [post] = await s.wait_for_posts(1)
    assert (post.channel, post.thread_ts) == ("C1", mention["ts"])
    assert post.text.startswith("echo: ") and post.text.endswith("what is 2+2?")
    await s.wait_for(lambda: s.reactions.get(("C1", mention["ts"])) == {"white_check_mark"}, what="the check mark")
    assert ("add", "C1", mention["ts"], "eyes") in s.reaction_log  # shown while it worked


async def test_thread_follow_up_without_mention(stack: Stack) -> None:
    await stack.start()
    s = stack.slack
    mention = s.message("C1", "<@UBOT> first")
    await stack.send(s.event(mention))
    await s.wait_for_posts(1)
    await stack.send(s.event(s.message("C1", "and second", thread_ts=mention["ts"])))
    await stack.send(s.event(s.message("C1", "chatter in the channel")))
    posts = await s.wait_for_posts(2)
    assert posts[1].thread_ts == mention["ts"] and posts[1].text.endswith("and second")
    await asyncio.sleep(0.3)
    assert len(answers(s, "C1")) == 2 and len(stack.llm.requests) == 2  # the chatter is only context


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_a_retried_event_and_a_twin_run_once(stack: Stack, mode: str) -> None:
    await stack.start(mode)
    s = stack.slack
    message = s.message("C1", "<@UBOT> once please")
    body = s.event(message)
    await stack.send(body)
    await stack.send(body, retry_num=1)
    await stack.send(s.event({**message, "type": "app_mention"}, event_id="EvOTHER"))
    await s.wait_for_posts(1)
    await asyncio.sleep(0.5)
    assert len(answers(s, "C1")) == 1 and len(stack.llm.requests) == 1


async def test_forged_and_stale_events_never_run(stack: Stack) -> None:
    await stack.start("http")
    s, channel = stack.slack, stack.channel
    assert channel is not None
    url = f"http://127.0.0.1:{channel.port}/slack/events"
    body = s.event(s.message("D1", "forged"))
    assert (await s.post_event(url, body, bad_signature=True))[0] == 401
    assert (await s.post_event(url, body, stale=True))[0] == 401
    await asyncio.sleep(0.3)
    assert not stack.llm.requests and not s.posts


async def _streaming_run(stack: Stack, channel: str = "C1") -> dict[str, Any]:
    s = stack.slack
    stack.llm.script(STREAMING)
    mention = s.message(channel, "<@UBOT> write an essay")
    await stack.send(s.event(mention))
    await stack.llm.wait_for_requests(1, timeout=5)
    await s.wait_for(lambda: ("add", channel, mention["ts"], "eyes") in s.reaction_log, what="eyes")
    return mention


async def _assert_stopped(stack: Stack, mention: dict[str, Any]) -> None:
    s = stack.slack
    await asyncio.wait_for(stack.llm.requests[0].disconnected.wait(), 3)
    await s.wait_for(lambda: any(p.text == "Stopped." for p in answers(s, "C1")), what='"Stopped."')
    stopped = next(p for p in answers(s, "C1") if p.text == "Stopped.")
    assert stopped.thread_ts == mention["ts"]
    await s.wait_for(lambda: "eyes" not in s.reactions.get(("C1", mention["ts"]), set()), what="no eyes")


@pytest.mark.parametrize("mode", ["socket", "http"])
@pytest.mark.parametrize(("slash", "text", "keys"), [
    ("/stop", "", ""),
    ("/chatgate", "stop", ""),  # the app command: the same /stop
    ("/mybot", "stop", ", command: /mybot"),  # a second chatgate app in the workspace
], ids=["stop", "chatgate-stop", "mybot-stop"])
async def test_slash_stop_stops_the_run_in_its_thread(stack: Stack, mode: str, slash: str, text: str,
                                                      keys: str) -> None:
    await stack.start(mode, keys="dm_policy: open, group_policy: open" + keys)
    mention = await _streaming_run(stack)
    await stack.send(stack.slack.command(slash, "C1", text=text))
    await _assert_stopped(stack, mention)


async def test_the_app_command_answers_status_and_help(stack: Stack) -> None:
    await stack.start("http")
    s = stack.slack
    for n, text in enumerate(("status", "help", "", "bogus words"), 1):
        await stack.send(s.command("/chatgate", "D1", text=text))
        await s.wait_for_posts(n)  # one answer at a time: their order is the commands'
    status, help_, bare, bogus = [p.text for p in answers(s, "D1")]
    assert "fake-model" in status and "fake-model" not in help_
    assert help_ == bare == bogus and "whoami" in help_  # alone or unknown: the help, as /help gives
    lines = help_.splitlines()  # each command as it is typed here: Slack keeps /status and /help
    assert any(line.startswith("/chatgate status") for line in lines)
    assert any(line.startswith("/chatgate help") for line in lines)
    assert any(line.startswith("/stop") for line in lines) and not any(line.startswith("/status") for line in lines)
    assert not stack.llm.requests  # never a message for the model


async def test_bare_stop_in_the_thread_stops_it(stack: Stack) -> None:
    await stack.start()
    mention = await _streaming_run(stack)
    await stack.send(stack.slack.event(stack.slack.message("C1", "stop", thread_ts=mention["ts"])))
    await _assert_stopped(stack, mention)


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_the_stop_button_stops_it(stack: Stack, mode: str) -> None:
    await stack.start(mode, streaming="edit")
    s = stack.slack
    mention = await _streaming_run(stack)
    draft = await s.wait_for(lambda: next((p for p in s.posts if p.blocks), None), what="a draft with the button")
    await stack.send(s.click(draft, "chatgate_stop"))
    await _assert_stopped(stack, mention)
    await s.wait_for(lambda: all(m.blocks is None for m in s.messages.values()), what="the button removed")


async def test_long_answer_chunked_in_the_thread(stack: Stack) -> None:
    await stack.start()
    s = stack.slack
    stack.llm.script(Reply.text("\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 30
                                            for i in range(20))))
    mention = s.message("C1", "<@UBOT> long one")
    await stack.send(s.event(mention))
    await s.wait_for(lambda: s.reactions.get(("C1", mention["ts"])) == {"white_check_mark"}, what="answered")
    posts = answers(s, "C1")
    assert len(posts) >= 3 and all(len(p.text) <= 4000 and p.thread_ts == mention["ts"] for p in posts)
    assert "".join(p.text for p in posts).count("Paragraph") == 20


async def test_mrkdwn_escaping_and_links(stack: Stack) -> None:
    await stack.start()
    stack.llm.script(Reply.text("If a < b && b > c, see [the docs](https://x.io/?a=1&b=2). <!channel>"))
    await stack.send(stack.slack.event(stack.slack.message("D1", "explain")))
    [post] = await stack.slack.wait_for_posts(1)
    assert post.text == ("If a &lt; b &amp;&amp; b &gt; c, see <https://x.io/?a=1&amp;b=2|the docs>. "
                         "&lt;!channel&gt;")


@pytest.mark.parametrize("where", ["C1", "D1"])
async def test_no_reply_leaves_no_message_status_or_reaction(stack: Stack, where: str) -> None:
    await stack.start()
    s = stack.slack
    stack.llm.script(Reply.text("NO_REPLY", delay=0.3))
    thread = None if where == "C1" else "50.000001"  # a DM in an assistant thread: the status line
    message = s.message(where, "<@UBOT> nothing to say", thread_ts=thread)
    await stack.send(s.event(message))
    if where == "C1":
        await s.wait_for(lambda: ("remove", "C1", message["ts"], "eyes") in s.reaction_log, what="eyes removed")
        assert not any(s.reactions.values())
    else:
        await s.wait_for(lambda: s.statuses and s.statuses[-1][2] == "", what="the status cleared")
        assert s.statuses[0][2] == "is thinking…"
    await asyncio.sleep(0.3)
    assert not s.posts and len(stack.llm.requests) == 1


async def test_native_stream_rolls_over_and_becomes_the_answer(stack: Stack) -> None:
    await stack.start(streaming="native", stream_rollover=0.6)
    s = stack.slack
    stack.llm.script(Reply.text("word " * 100, delay=0.02))  # ~2 s
    mention = s.message("C1", "<@UBOT> stream it")
    await stack.send(s.event(mention))
    await s.wait_for(lambda: s.reactions.get(("C1", mention["ts"])) == {"white_check_mark"}, timeout=10,
                     what="answered")
    streams = list(s.streams.values())
    assert len(streams) >= 2 and all(st.state == "stopped" for st in streams)
    first = streams[0]
    assert set(s.deleted) == {("C1", st.ts) for st in streams[1:]}  # continuations gone
    final = s.messages[("C1", first.ts)]
    assert final.text.startswith("word word") and final.text.count("word") == 100  # the answer replaced it
    assert not answers(s, "C1")  # no second copy


async def test_a_streamed_draft_pings_nobody(stack: Stack) -> None:
    await stack.start(streaming="native")
    s = stack.slack
    answer = "Ping <!here>, <!channel>, <!everyone>, <@U123>, <#C1> and <!subteam^S1|@devs> now. " * 3
    stack.llm.script(Reply.text(answer, chunk_size=3, delay=0.01))
    mention = s.message("C1", "<@UBOT> ping them all")
    await stack.send(s.event(mention))
    await s.wait_for(lambda: s.reactions.get(("C1", mention["ts"])) == {"white_check_mark"}, timeout=10,
                     what="answered")
    [stream] = s.streams.values()
    streamed = [p for p in s.posts if "Stream" in p.method]
    assert len(streamed) >= 2 and stream.text.count("Ping") == 3
    assert not re.search(r"<[!@#]", stream.text), stream.text  # whatever the stream showed, all along
    final = s.messages[("C1", stream.ts)]  # the answer replaced it, rendered as every answer is
    assert "<!" not in final.text and "&lt;!here&gt;" in final.text


async def test_files_fetched_only_for_messages_that_run(stack: Stack) -> None:
    await stack.start(keys="dm_policy: open, group_policy: allowlist, channels: [C1], max_download_mb: 0.001")
    s = stack.slack
    notes, big = s.add_file("notes.txt", b"remember the milk"), s.add_file("big.bin", b"x" * 5000)
    await stack.send(s.event(s.message("C9", "<@UBOT> read this", subtype="file_share", files=[notes])))
    await stack.send(s.event(s.message("D1", "read this", subtype="file_share", files=[notes])))
    [post] = await s.wait_for_posts(1)
    assert post.channel == "D1" and s.downloads == [notes["id"]]  # the channel that is not allowed: nothing
    saved = list((stack.tmp_path / "workspaces").glob("*/inbox/notes.txt"))
    assert len(saved) == 1 and saved[0].read_bytes() == b"remember the milk"
    await stack.send(s.event(s.message("D1", "and this", subtype="file_share", files=[big])))
    await s.wait_for_posts(2)
    assert s.downloads == [notes["id"]]  # over max_download_mb: refused from its size, never downloaded
    assert len(stack.llm.requests) == 1


async def test_a_429_is_waited_out_and_sent_once(stack: Stack) -> None:
    await stack.start()
    s = stack.slack
    s.fail_next("chat.postMessage", retry_after=1)
    sent_at = time.monotonic()
    await stack.send(s.event(s.message("D1", "busy Slack")))
    [post] = await s.wait_for_posts(1, timeout=10)
    assert post.at - sent_at >= 1.0  # Retry-After: 1 honoured
    first, second = s.called("chat.postMessage")[:2]
    assert post.text == "echo: busy Slack" and first["text"] == second["text"]
    await asyncio.sleep(0.5)
    assert len(s.called("chat.postMessage")) == 2 and len(answers(s, "D1")) == 1  # one refused, one landed


async def test_edit_streaming_posts_once_and_updates_at_most_once_a_second(stack: Stack) -> None:
    await stack.start(streaming="edit")
    s = stack.slack
    stack.llm.script(Reply.text("word " * 120, delay=0.02))  # ~2.4 s of answer
    await stack.send(s.event(s.message("D1", "stream it")))
    await s.wait_for(lambda: any(p.method == "chat.update" and p.text.count("word") == 120 for p in s.posts),
                     timeout=10, what="the whole answer")
    await asyncio.sleep(0.5)
    [draft] = answers(s, "D1")
    updates = [p for p in s.posts if p.method == "chat.update" and p.ts == draft.ts]
    assert len(updates) >= 2
    times = [draft.at] + [p.at for p in updates if p.blocks is not None]  # with the button: while it ran
    assert all(b - a >= 0.95 for a, b in zip(times, times[1:]))
    assert s.messages[("D1", draft.ts)].text.count("word") == 120 and s.messages[("D1", draft.ts)].blocks is None


async def test_each_assistant_thread_is_a_conversation_of_its_own(stack: Stack) -> None:
    await stack.start()
    s = stack.slack
    await stack.send(s.event(s.message("D1", "my secret is 1234", thread_ts="10.000001")))
    await s.wait_for_posts(1)
    await stack.send(s.event(s.message("D1", "what is my secret?", thread_ts="20.000001")))
    await s.wait_for_posts(2)
    await stack.send(s.event(s.message("D1", "and again?", thread_ts="10.000001")))
    posts = await s.wait_for_posts(3)
    assert [p.thread_ts for p in posts] == ["10.000001", "20.000001", "10.000001"]
    assert "1234" not in json.dumps(stack.llm.requests[1].body["messages"])  # a new thread starts fresh
    assert "1234" in json.dumps(stack.llm.requests[2].body["messages"])  # its own thread remembers
