"""The Slack channel against the fake Slack, through the real slack-bolt and slack_sdk."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from adapters.slack import endpoint
from adapters.slack.channel import SlackChannel
from adapters.slack.config import SlackConfig
from adapters.slack.dialect import SLACK, ping_free, sendable
from bot.channels import SendFailed, Status, Target
from bot.errors import ChannelError
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage
from bot.outbound.progress import EditDraft
from tests.fakes.slack_server import FakeSlack

pytestmark = pytest.mark.timeout(20)


class Inbox:
    """Records what the channel hands to the core; ``gate`` holds the call (storage that is slow)."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.gate: asyncio.Event | None = None
        self.fail = False
        self.changed = asyncio.Event()

    async def __call__(self, msg: InboundMessage) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise RuntimeError("database is locked")
        self.messages.append(msg)
        self.changed.set()

    async def wait(self, n: int, timeout: float = 5.0) -> list[InboundMessage]:
        async def until() -> None:
            while len(self.messages) < n:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), timeout)
        return self.messages


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


Start = Callable[..., Awaitable[tuple[SlackChannel, Inbox]]]


@pytest.fixture
async def start(slack: FakeSlack) -> AsyncIterator[Start]:
    channels: list[SlackChannel] = []

    async def go(mode: str = "socket", clock: Callable[[], float] | None = None,
                 **keys: Any) -> tuple[SlackChannel, Inbox]:
        config = SlackConfig.model_validate({
            "enabled": True, "mode": mode, "bot_token": slack.bot_token, "app_token": slack.app_token,
            "signing_secret": slack.signing_secret, "base_url": slack.base_url,
            "http": {"listen": "127.0.0.1", "port": 0}, "channels": ["*"], **keys})
        channel = SlackChannel(config, SLACK, **({"clock": clock} if clock else {}))
        inbox = Inbox()
        await channel.start(inbox)
        channels.append(channel)
        return channel, inbox

    yield go
    for channel in channels:
        await channel.stop()


def url(channel: SlackChannel) -> str:
    return f"http://127.0.0.1:{channel.port}/slack/events"


async def deliver(slack: FakeSlack, channel: SlackChannel, mode: str, body: dict[str, Any], **kw: Any) -> object:
    """Send one payload the way ``mode`` does; Socket Mode: the ack, HTTP: the status."""
    if mode == "socket":
        envelope = await slack.push(body, retry_attempt=kw.get("retry_num") or 0)
        return await slack.wait_for_ack(envelope)
    status, _ = await slack.post_event(url(channel), body, **kw)
    return status


# ------------------------------------------------------------------------- inbound


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_dm_is_mapped_and_acked(slack: FakeSlack, start: Start, mode: str) -> None:
    channel, inbox = await start(mode)
    acked = await deliver(slack, channel, mode, slack.event(slack.message("D1", "hello &lt;there&gt;")))
    assert acked == 200 or (isinstance(acked, dict) and "envelope_id" in acked)
    [msg] = inbox.messages
    assert (msg.platform, msg.chat_id, msg.chat_type, msg.text, msg.addressed, msg.thread_id) == (
        "slack", "D1", ChatType.DM, "hello <there>", True, None)
    assert (msg.sender.id, msg.sender.name, msg.account) == ("U1", "Alice", "UBOT")


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_ack_only_after_the_inbox_stored_it(slack: FakeSlack, start: Start, mode: str) -> None:
    channel, inbox = await start(mode)
    inbox.gate = asyncio.Event()
    body = slack.event(slack.message("D1", "slow store"))
    pending = asyncio.ensure_future(deliver(slack, channel, mode, body))
    await asyncio.sleep(0.3)
    assert not pending.done() and not slack.acks  # not confirmed while the store has not returned
    inbox.gate.set()
    await asyncio.wait_for(pending, 5)
    assert len(inbox.messages) == 1


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_not_acked_when_it_could_not_be_stored(slack: FakeSlack, start: Start, mode: str) -> None:
    channel, inbox = await start(mode)
    inbox.fail = True
    body = slack.event(slack.message("D1", "lost?"))
    if mode == "http":
        status, _ = await slack.post_event(url(channel), body)
        assert status == 500  # Slack will retry
    else:
        envelope = await slack.push(body)
        with pytest.raises(TimeoutError):
            await slack.wait_for_ack(envelope, timeout=0.5)


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_retries_and_twin_events_map_to_one_message_id(slack: FakeSlack, start: Start, mode: str) -> None:
    channel, inbox = await start(mode)
    message = slack.message("C1", "<@UBOT> how are you?")
    body = slack.event(message)
    await deliver(slack, channel, mode, body)
    await deliver(slack, channel, mode, body, retry_num=1)  # Slack's retry of the same event_id
    await deliver(slack, channel, mode, slack.event({**message, "type": "app_mention"}))  # the twin
    await inbox.wait(3)
    assert len({m.message_id for m in inbox.messages}) == 1
    assert inbox.messages[0] == inbox.messages[1] == inbox.messages[2]  # the core's dedupe runs it once
    assert inbox.messages[0].thread_id == message["ts"] and inbox.messages[0].addressed
    if mode == "socket":
        assert len(slack.acks) == 3  # each delivery acked once


async def test_forged_and_stale_requests_are_refused(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("http")
    body = slack.event(slack.message("D1", "forged"))
    assert (await slack.post_event(url(channel), body, bad_signature=True))[0] == 401
    assert (await slack.post_event(url(channel), body, stale=True))[0] == 401
    assert (await slack.post_event(url(channel), slack.command("/stop", "D1"), bad_signature=True))[0] == 401
    click = {"type": "block_actions", "user": {"id": "U1"}, "channel": {"id": "D1"}, "container": {},
             "actions": [{"action_id": "chatgate_stop", "value": "", "action_ts": "1.1"}]}
    assert (await slack.post_event(url(channel), click, stale=True))[0] == 401
    assert inbox.messages == []
    status, text = await slack.post_event(url(channel), {"type": "url_verification", "challenge": "abc123",
                                                         "token": "x"})
    assert status == 200 and "abc123" in text


async def _raw(channel: SlackChannel, head: str, body: bytes) -> str:
    """Send ``head`` and the start of a body, never the rest; Slack's status line, or "" when none came."""
    reader, writer = await asyncio.open_connection("127.0.0.1", channel.port)
    try:
        writer.write(head.encode() + b"\r\n" + body)  # not drained: the answer may come before it is all sent
        async with asyncio.timeout(3):
            return (await reader.readline()).decode().strip()
    except TimeoutError:
        return ""
    finally:
        writer.close()


def _head(extra: str) -> str:
    return f"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}"


async def test_an_unsigned_or_oversized_request_is_refused_unread(slack: FakeSlack, start: Start,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Nothing is read or parsed before the signature: a 4 MB body whose first KB came is
    answered at once, without waiting for the rest."""
    caplog.set_level(logging.DEBUG)
    channel, inbox = await start("http")
    four_mb = 4 * 1024 * 1024
    looks_signed = "".join(f"{k}: {v}\r\n" for k, v in slack.sign("x", secret="not-the-secret").items())
    assert await _raw(channel, _head(f"Content-Length: {four_mb}\r\n"), b"{" * 1024) == "HTTP/1.1 401 Unauthorized"
    assert await _raw(channel, _head(f"Content-Length: {four_mb}\r\n{looks_signed}"), b"{" * 1024) == \
        "HTTP/1.1 413 Request Entity Too Large"
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"{" * 64 * 1024)  # chunked: no length said, cut at the cap
    assert await _raw(channel, _head(f"Transfer-Encoding: chunked\r\n{looks_signed}"), chunk * 20) == \
        "HTTP/1.1 413 Request Entity Too Large"
    assert (await _raw(channel, _head(f"Transfer-Encoding: chunked\r\n{looks_signed}"), b"zz\r\n")).endswith(
        " 400 Bad Request")  # malformed: aiohttp refuses it before the handler, quietly too
    reader, writer = await asyncio.open_connection("127.0.0.1", channel.port)
    writer.write(f"{_head(f'Content-Length: 100{chr(13)}{chr(10)}{looks_signed}')}\r\nabc".encode())
    await asyncio.sleep(0.2)
    writer.transport.abort()  # gone half way through its body
    await slack.wait_for(lambda: any("broke off" in r.getMessage() for r in caplog.records), what="the drop seen")
    async with aiohttp.ClientSession() as session:
        for headers in ({}, {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=abc"}, {
                "X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=" + "0" * 64}):
            async with session.post(url(channel), data=b"{not json \xff", headers=headers) as resp:
                assert resp.status == 401
    assert inbox.messages == [] and [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert (await slack.post_event(url(channel), slack.event(slack.message("D1", "still open"))))[0] == 200
    assert [m.text for m in inbox.messages] == ["still open"]


async def test_a_body_that_keeps_coming_is_refused() -> None:
    class Bolt:
        async def async_dispatch(self, request: object) -> None:
            raise AssertionError("never parsed")

    runner = endpoint.runner(Bolt(), "s3cret", "/slack/events", read_time=0.3)  # type: ignore[arg-type]
    await runner.setup()
    await aiohttp.web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        port = runner.addresses[0][1]
        signed_looking = f"X-Slack-Request-Timestamp: {int(time.time())}\r\nX-Slack-Signature: v0={'0' * 64}\r\n"
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_head(f"Content-Length: 100\r\n{signed_looking}").encode() + b"\r\nabc")
        async with asyncio.timeout(3):
            assert (await reader.readline()).startswith(b"HTTP/1.1 408")
        writer.close()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(("timestamp", "fresh"), [
    ("1000000", True), ("999700", True), ("1000300", True), ("999699", False), ("1000301", False),
    ("", False), (None, False), ("1e6", False), ("-1000000", False), ("１０００００", False), ("9" * 40, False),
])
def test_timestamps_within_five_minutes(timestamp: str | None, fresh: bool) -> None:
    assert endpoint.fresh(timestamp, 1_000_000.0) is fresh


def test_signatures_on_the_raw_bytes() -> None:
    body = '{"text": "caf\u00e9"}'.encode()
    good = "v0=" + hmac.new(b"s3cret", b"v0:1000000:" + body, hashlib.sha256).hexdigest()
    assert endpoint.well_formed(good) and endpoint.signed(b"s3cret", "1000000", body, good)
    assert not endpoint.signed(b"s3cret", "1000001", body, good)
    assert not endpoint.signed(b"other", "1000000", body, good)
    assert not endpoint.signed(b"s3cret", "1000000", body + b" ", good)
    for shape in (None, "", good[3:], "v1=" + good[3:], good.upper(), good + "0", "v0=" + "g" * 64):
        assert not endpoint.well_formed(shape)


async def test_socket_mode_reconnects_when_slack_asks(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("socket")
    first = slack.sockets[0]
    await slack.refresh()
    await slack.wait_for(lambda: slack.connections_opened == 2 and slack.sockets and slack.sockets[-1] is not first,
                         what="a new connection")
    await slack.wait_for(lambda: first not in slack.sockets, what="the old connection closed")
    await slack.wait_for_ack(await slack.push(slack.event(slack.message("D1", "still there?"))))
    assert [m.text for m in inbox.messages] == ["still there?"]


async def test_ignored_events_are_acked_but_not_stored(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("socket")
    for body in (slack.event(slack.message("C1", "edited", subtype="message_changed")),
                 slack.event(slack.message("C1", "mine", user="UBOT")),
                 slack.event(slack.message("C1", "beep", user="U7", bot_id="B7")),
                 slack.event({"type": "reaction_added", "user": "U1", "reaction": "+1"})):
        await slack.wait_for_ack(await slack.push(body))
    assert inbox.messages == []


async def test_mention_answered_in_thread_then_follow_up_without_mention(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("socket")
    mention = slack.message("C1", "<@UBOT> summarise <@U1>'s plan", kind="app_mention")
    await slack.wait_for_ack(await slack.push(slack.event(mention)))
    [msg] = inbox.messages
    assert (msg.text, msg.thread_id, msg.addressed) == ("summarise @Alice's plan", mention["ts"], True)
    ts = await channel.send(Target.of(msg), "*Plan:* ship it")
    [post] = slack.posts
    assert (post.ts, post.thread_ts, post.text, post.blocks) == (ts, mention["ts"], "*Plan:* ship it", None)
    follow = slack.message("C1", "and after that?", thread_ts=mention["ts"])
    other = slack.message("C1", "unrelated", thread_ts="1.000001")
    for body in (follow, other):
        await slack.wait_for_ack(await slack.push(slack.event(body)))
    assert [(m.text, m.addressed, m.thread_id) for m in inbox.messages[1:]] == [
        ("and after that?", True, mention["ts"]), ("unrelated", False, "1.000001")]


async def test_participation_off_and_after_a_day(slack: FakeSlack, start: Start) -> None:
    clock = Clock()
    channel, inbox = await start("socket", clock=clock)
    await channel.send(Target("C1", ChatType.GROUP, "50.000001", "50.000001"), "hi")
    follow = slack.event(slack.message("C1", "more", thread_ts="50.000001"))
    await slack.wait_for_ack(await slack.push(follow))
    clock.now += 24 * 3600 + 1
    await slack.wait_for_ack(await slack.push(slack.event(slack.message("C1", "later", thread_ts="50.000001"))))
    assert [m.addressed for m in inbox.messages] == [True, False]


async def test_files_are_metadata_then_fetched_with_a_cap(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("socket")
    small, big = slack.add_file("notes.txt", b"x" * 100, "text/plain"), slack.add_file("big.bin", b"y" * 5000)
    body = slack.event(slack.message("D1", "files", subtype="file_share", files=[small, big]))
    await slack.wait_for_ack(await slack.push(body))
    [msg] = inbox.messages
    first, second = msg.attachments
    assert (first.kind, first.name, first.size, first.data) == (AttachmentKind.DOCUMENT, "notes.txt", 100, None)
    assert await channel.fetch(first, 1000) == b"x" * 100
    with pytest.raises(SendFailed) as refused:
        await channel.fetch(second, 1000)
    assert refused.value.permanent
    unknown_size = Attachment(AttachmentKind.DOCUMENT, "big.bin", platform_file_id=big["url_private"])
    with pytest.raises(SendFailed, match="over the 1000 byte limit"):
        await channel.fetch(unknown_size, 1000)  # the size Slack gave is not trusted alone
    elsewhere = Attachment(AttachmentKind.DOCUMENT, "x", platform_file_id="https://evil.example/x")
    with pytest.raises(SendFailed, match="not a Slack file URL"):
        await channel.fetch(elsewhere, 1000)  # the bot token never leaves for another host


# ------------------------------------------------------------------------- commands


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_slash_stop_goes_to_the_live_thread(slack: FakeSlack, start: Start, mode: str) -> None:
    channel, inbox = await start(mode)
    mention = slack.message("C1", "<@UBOT> write a novel")
    await deliver(slack, channel, mode, slack.event(mention))
    [run] = inbox.messages
    await channel.status(Target.of(run), Status.WORKING)
    await deliver(slack, channel, mode, slack.command("/stop", "C1"))
    await deliver(slack, channel, mode, slack.command("/new", "C1", text="fresh"))
    stop, new = inbox.messages[1:]
    assert (stop.text, stop.thread_id, stop.addressed) == ("/stop", mention["ts"], True)
    await channel.status(Target.of(run), Status.FAILED)
    assert (new.text, new.thread_id) == ("/new fresh", mention["ts"])


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_chatgate_stop_is_the_same_message_as_slash_stop(slack: FakeSlack, start: Start, mode: str) -> None:
    channel, inbox = await start(mode)
    mention = slack.message("C1", "<@UBOT> write a novel")
    await deliver(slack, channel, mode, slack.event(mention))
    [run] = inbox.messages
    await channel.status(Target.of(run), Status.WORKING)
    plain = slack.command("/stop", "C1", text="now")
    await deliver(slack, channel, mode, plain)
    await deliver(slack, channel, mode, {**slack.command("/chatgate", "C1", text="STOP  now"),
                                         "trigger_id": plain["trigger_id"]})
    stop, app_stop = inbox.messages[1:]
    assert replace(app_stop, timestamp=stop.timestamp) == stop  # all but the time it arrived
    assert (stop.text, stop.thread_id) == ("/stop now", mention["ts"])
    await channel.status(Target.of(run), Status.FAILED)


async def test_app_command_name_from_the_config(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("http", command="/mybot")
    for name, text in [("/mybot", "stop"), ("/mybot", "whoami"), ("/mybot", ""), ("/new", "")]:
        assert (await slack.post_event(url(channel), slack.command(name, "D1", text=text)))[0] == 200
    assert [m.text for m in inbox.messages] == ["/stop", "/whoami", "/help", "/new"]
    for name in ("/chatgate", "/status", "/help"):  # another app's, and names Slack keeps: never registered
        assert (await slack.post_event(url(channel), slack.command(name, "D1", text="stop")))[0] == 404


async def test_command_prefix(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("http", command_prefix="cg-")
    await slack.post_event(url(channel), slack.command("/cg-status", "D1"))
    status, _ = await slack.post_event(url(channel), slack.command("/stop", "D1"))
    assert [m.text for m in inbox.messages] == ["/status"] and status == 404


async def test_bare_stop_in_a_thread_with_a_live_run(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("socket")
    target = Target("C1", ChatType.GROUP, "70.000001", "70.000001")
    await channel.status(target, Status.WORKING)  # a run lives there, the bot has not posted yet
    await slack.wait_for_ack(await slack.push(slack.event(slack.message("C1", "stop", thread_ts="70.000001"))))
    [msg] = inbox.messages
    assert (msg.text, msg.addressed, msg.thread_id) == ("/stop", True, "70.000001")


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_stop_button_on_the_draft(slack: FakeSlack, start: Start, mode: str) -> None:
    channel, inbox = await start(mode, streaming="edit")
    target = Target("C1", ChatType.GROUP, "80.000001", "80.000001")
    await channel.status(target, Status.WORKING)
    draft = await channel.send(target, "Thinking about it")
    await channel.edit(target, draft, "Thinking about it more")
    post = slack.messages[("C1", draft)]
    assert post.text == "Thinking about it more" and post.blocks and post.blocks[-1]["type"] == "actions"
    await deliver(slack, channel, mode, slack.click(post, "chatgate_stop"))
    [stop] = inbox.messages
    assert (stop.text, stop.thread_id, stop.chat_id) == ("/stop", "80.000001", "C1")
    second = await channel.send(target, "chunk two")  # only the draft carries the button
    assert slack.messages[("C1", second)].blocks is None
    await channel.status(target, Status.FAILED)
    assert slack.messages[("C1", draft)].blocks is None and slack.messages[("C1", draft)].text == post.text


# ------------------------------------------------------------------------- outbound


async def test_reactions_lifecycle_in_channels(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    endings = {"1.1": Status.DONE, "2.2": Status.FAILED, "3.3": Status.SILENT}
    for ts, ending in endings.items():
        target = Target("C1", ChatType.GROUP, ts, ts)
        await channel.status(target, Status.WORKING)
        await channel.status(target, Status.WORKING)  # a refresh adds nothing
        assert slack.reactions[("C1", ts)] == {"eyes"}
        await channel.status(target, ending)
        await channel.status(target, Status.WORKING)  # late: never a stale eyes
    assert slack.reactions[("C1", "1.1")] == {"white_check_mark"}
    assert slack.reactions[("C1", "2.2")] == {"x"}
    assert slack.reactions[("C1", "3.3")] == set()
    assert sum(1 for op in slack.reaction_log if op[0] == "add" and op[3] == "eyes") == 3


async def test_no_reaction_on_a_command_or_button_id(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    for reply_to in ("cmd:123.4.abc", "action:99.1"):
        target = Target("C1", ChatType.GROUP, "5.000001", reply_to)
        await channel.status(target, Status.WORKING)
        await channel.status(target, Status.DONE)
    assert not slack.called("reactions.add") and not slack.called("reactions.remove")


async def test_assistant_thread_status_set_and_cleared(slack: FakeSlack, start: Start) -> None:
    clock = Clock()
    channel, _ = await start("socket", clock=clock)
    target = Target("D1", ChatType.DM, "60.000001", "60.000002")
    await channel.status(target, Status.WORKING)
    clock.now += 5
    await channel.status(target, Status.WORKING)  # within a minute: not sent again
    clock.now += 61
    await channel.status(target, Status.WORKING)
    await channel.status(target, Status.SILENT)
    assert [s[2] for s in slack.statuses] == ["is thinking…", "is thinking…", ""]
    assert not slack.reaction_log


async def test_send_edit_and_failures(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    dm = Target("D1")
    ts = await channel.send(dm, "hello *there*")
    await channel.edit(dm, ts, "hello _again_")
    assert slack.messages[("D1", ts)].text == "hello _again_" and slack.messages[("D1", ts)].thread_ts is None
    with pytest.raises(SendFailed) as too_long:
        await channel.send(dm, "x" * 40_001)
    assert too_long.value.permanent
    slack.fail_next("chat.postMessage", retry_after=3)
    before = len(slack.called("chat.postMessage"))
    with pytest.raises(SendFailed) as limited:
        await channel.send(dm, "again")
    assert (limited.value.permanent, limited.value.retry_after) == (False, 3.0)
    assert len(slack.called("chat.postMessage")) == before + 1  # one attempt: delivery owns retries
    slack.fail_next("chat.postMessage", "internal_error", status=500)
    with pytest.raises(SendFailed) as broken:
        await channel.send(dm, "again")
    assert not broken.value.permanent
    with pytest.raises(SendFailed) as gone:
        await channel.edit(dm, "999.999", "x")
    assert gone.value.permanent


async def test_send_file_in_thread(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    file_id = await channel.send_file(Target("C1", ChatType.GROUP, "9.000001", "9.000001"), "answer.md",
                                      b"# Long answer\n" * 100, "The answer is long, so here it is as a file.")
    [upload] = slack.uploads.values()
    assert file_id == "file:FU0001"
    assert (upload["name"], upload["data"], upload["channel"], upload["thread_ts"]) == (
        "answer.md", b"# Long answer\n" * 100, "C1", "9.000001")
    assert upload["comment"].startswith("The answer is long")


async def test_native_stream_rolls_over_and_recovers(slack: FakeSlack, start: Start) -> None:
    clock = Clock()
    channel, inbox = await start("socket", clock=clock)
    mention = slack.message("C1", "<@UBOT> tell me a long story")
    await slack.wait_for_ack(await slack.push(slack.event(mention)))
    target = Target.of(inbox.messages[0])
    draft = await channel.stream(target)
    await draft.append("Once ")
    clock.now += 10
    await draft.append("upon a time")
    [first] = [s for s in slack.streams.values()]
    assert (first.thread_ts, first.text) == (mention["ts"], "Once upon a time")
    assert slack.called("chat.startStream")[0]["recipient_user_id"] == "U1"
    clock.now += 300  # past the ~5-minute limit: a fresh stream
    await draft.append(", there was")
    slack.stream_limit = 0.0  # Slack ended the stream on its side
    await asyncio.sleep(0.01)
    clock.now += 10
    await draft.append(" a bot.")
    streams = list(slack.streams.values())
    assert len(streams) == 3 and [s.text for s in streams] == ["Once upon a time", ", there was", " a bot."]
    slack.stream_limit = 300.0
    first_ts = await draft.close()
    assert first_ts == first.ts
    assert set(slack.deleted) == {("C1", streams[1].ts), ("C1", streams[2].ts)}  # the answer replaces them
    assert streams[2].state == "stopped"


PINGS = re.compile(r"<[!@#]|&lt;[!@#]|&#0*60;[!@#]|@(?:here|channel|everyone)\b")


async def test_a_native_stream_pings_nobody(slack: FakeSlack, start: Start) -> None:
    """Slack's special tokens reach chat.*Stream defused (with a zero-width space), even cut
    between two appends; the text reads the same."""
    clock = Clock()
    channel, inbox = await start("socket", clock=clock)
    await slack.wait_for_ack(await slack.push(slack.event(slack.message("C1", "<@UBOT> ping them"))))
    draft = await channel.stream(Target.of(inbox.messages[0]))
    pieces = ["Hey <!here> and <!chan", "nel>, <!everyone>, <@U123>, <#C1|general>, <!subteam^S1|@devs>, <",
              "!here>, &lt;!here&gt;, &#60;!channel&gt;, &lt;", "@U1&gt; @here and @every",
              "one: see `a < b`, <https://x.io|x> @", "channel"]
    for piece in pieces:
        await draft.append(piece)
        clock.now += 2  # each append is sent at once
    await draft.close()
    [stream] = slack.streams.values()
    assert len(slack.called("chat.appendStream")) >= 3  # it streamed, piece by piece
    assert PINGS.search(stream.text) is None, stream.text
    assert stream.text.replace("\u200b", "") == "".join(pieces)


def test_ping_free_markdown() -> None:
    for text in ("<!here>", "<!channel>", "<!everyone>", "<!subteam^S1|@devs>", "<@U123>", "<@W1|bob>",
                 "<#C1|general>", "&lt;!here&gt;", "&#060;!here>", "&#x3C;!here>", "@here", "@channel!",
                 "hi @everyone"):
        assert PINGS.search(ping_free(text)) is None and not re.search(r"&#[xX]0*3[cC];[!@#]", ping_free(text))
        assert ping_free(text).replace("\u200b", "") == text
    for text in ("a < b", "<https://x.io|x>", "x@here.com", "@heres", "mail bob@example.com", "1 <= 2"):
        assert ping_free(text) == text
    assert [sendable(t) for t in ("done.", "Hey <!he", "a < b", "a <", "x &l", "x &lt;", "@every", "a@b", "<x> ok")
            ] == [5, 8, 5, 2, 2, 2, 0, 1, 6]


async def test_no_thread_no_stream_but_a_draft_with_the_stop_button(slack: FakeSlack, start: Start) -> None:
    clock = Clock()
    channel, inbox = await start("http", clock=clock)
    dm = Target("D1", ChatType.DM, None, "1.000001")  # a top-level DM: Slack streams only in threads
    await channel.status(dm, Status.WORKING)
    assert await channel.stream(dm) is None  # no stream here: the core's progress edits a draft instead
    draft = EditDraft(channel, dm)
    await draft.append("Hello")
    clock.now += 0.2
    await draft.append(" **there**, friend")  # within a second: shown by a later edit
    [post] = slack.posts
    assert post.thread_ts is None and post.text == "Hello" and post.blocks is not None
    clock.now += 1
    await slack.wait_for(lambda: slack.messages[("D1", post.ts)].text == "Hello \u200b*there*\u200b, friend",
                         what="the delayed edit")
    assert await draft.close() == post.ts and not slack.called("chat.startStream")
    await channel.edit(dm, post.ts, "Hello there, friend.")  # the answer replaces the draft
    await channel.status(dm, Status.DONE)
    final = slack.messages[("D1", post.ts)]
    assert (final.text, final.blocks) == ("Hello there, friend.", None)
    assert await (await channel.stream(Target("D1", ChatType.DM, "1.000001", "1.000002"))).close() is None
    assert not slack.called("chat.startStream")  # nothing streamed, nothing shown


# ------------------------------------------------------------------------- start-up


async def test_refused_tokens_and_missing_scopes_name_the_key(slack: FakeSlack, start: Start) -> None:
    with pytest.raises(ChannelError, match=r"^channels\.slack\.bot_token: Slack refused the token \(invalid_auth"):
        await start("socket", bot_token="xoxb-wrong")
    with pytest.raises(ChannelError, match=r"^channels\.slack\.app_token: Slack refused"):
        await start("socket", app_token="xapp-wrong")
    slack.scopes = "chat:write,app_mentions:read,im:history,users:read"
    with pytest.raises(ChannelError, match=r"lacks the scope reactions:write"):
        await start("http")


async def test_rendered_answer_goes_as_mrkdwn_chunks(slack: FakeSlack, start: Start) -> None:
    from bot.outbound.split import render_chunks

    channel, _ = await start("socket")
    answer = "Use `a < b && c > d` and see [the docs](https://x.io/?a=1&b=2); <!channel> stays text.\n\n" + \
        "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 20 for i in range(30))
    chunks = render_chunks(answer, channel.dialect, channel.shape)
    assert len(chunks) > 1
    target = Target("C1", ChatType.GROUP, "3.000001", "3.000001")
    for chunk in chunks:
        await channel.send(target, chunk)
    posts = slack.posts
    assert len(posts) == len(chunks) and all(len(p.text) <= 4000 and p.thread_ts == "3.000001" for p in posts)
    assert posts[0].text.startswith("Use `a &lt; b &amp;&amp; c &gt; d` and see <https://x.io/?a=1&amp;b=2|the docs>;")
    assert "&lt;!channel&gt;" in posts[0].text and "<!channel>" not in posts[0].text


async def test_names_looked_up_together_cached_and_never_hold_the_ack(slack: FakeSlack, start: Start) -> None:
    channel, inbox = await start("socket")
    slack.add_user("U2", "bob", "Bob")
    body = slack.event(slack.message("D1", "ask <@U2> and <@U404>"))
    await slack.wait_for_ack(await slack.push(body))
    await slack.wait_for_ack(await slack.push(slack.event(slack.message("D1", "again <@U2>"))))
    first, second = inbox.messages
    assert (first.text, first.sender.name) == ("ask @Bob and @U404", "Alice")  # an unknown user stays an id
    assert (second.text, second.sender.name) == ("again @Bob", "Alice")
    await slack.wait_for_ack(await slack.push(slack.event(slack.message("D1", "and <@U404>"))))
    assert inbox.messages[2].text == "and @U404"
    assert sorted(p["user"] for p in slack.called("users.info")) == ["U1", "U2", "U404"]  # each asked once


@pytest.mark.parametrize(("keys", "heard"), [
    ({"channels": ["C1"]}, {"C1", "D1"}),  # group_policy allowlist (the default): C9 is not listed
    ({"group_policy": "open"}, {"C1", "C9", "D1"}),
    ({"group_policy": "disabled", "channels": ["C1"]}, {"D1"}),
    ({"dm_policy": "disabled", "channels": ["*"]}, {"C1", "C9"}),
])
async def test_no_name_is_looked_up_where_the_bot_does_not_listen(slack: FakeSlack, start: Start,
                                                                  keys: dict[str, Any], heard: set[str]) -> None:
    """users.info spends the app's quota: only for messages the access settings may let through."""
    channel, inbox = await start("socket", **keys)
    slack.add_user("U2", "bob", "Bob")
    for chat, user in (("C9", "U7"), ("C1", "U1"), ("D1", "U2")):
        await slack.wait_for_ack(await slack.push(slack.event(slack.message(chat, f"<@UBOT> hi <@U{chat}>",
                                                                            user=user))))
        asked = {p["user"] for p in slack.called("users.info")}
        assert bool(asked) is (chat in heard), (chat, asked)
        slack.calls.clear()
    assert [m.chat_id for m in inbox.messages] == ["C9", "C1", "D1"]  # the core still decides what they are


async def test_a_refresh_cut_off_mid_request_leaves_no_stale_eyes(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    target = Target("C1", ChatType.GROUP, "4.000001", "4.000001")
    slack.delay["reactions.add"] = 0.3
    refresh = asyncio.ensure_future(channel.status(target, Status.WORKING))
    await slack.wait_for(lambda: slack.called("reactions.add"), what="reactions.add in flight")
    refresh.cancel()  # the run ended: progress cancels its status task
    await asyncio.sleep(0.4)  # ... but Slack added the reaction anyway
    slack.delay.clear()
    await channel.status(target, Status.SILENT)
    assert slack.reactions[("C1", "4.000001")] == set()


async def test_an_ending_without_working_seen_still_clears(slack: FakeSlack, start: Start) -> None:
    """After a restart, delivery may end a run this process never showed as working."""
    channel, _ = await start("socket")
    slack.reactions[("C1", "6.000001")] = {"eyes"}  # left by the process before the restart
    await channel.status(Target("C1", ChatType.GROUP, "6.000001", "6.000001"), Status.DONE)
    assert slack.reactions[("C1", "6.000001")] == {"white_check_mark"}
    await channel.status(Target("D1", ChatType.DM, "7.000001", "7.000002"), Status.DONE)
    assert slack.statuses == [("D1", "7.000001", "")]


async def test_an_edit_removes_a_button_left_before_a_restart(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket", streaming="edit")
    target = Target("C1", ChatType.GROUP, "8.000001", "8.000001")
    await channel.status(target, Status.WORKING)
    draft = await channel.send(target, "draft")
    restarted, _ = await start("socket", streaming="edit")
    await restarted.edit(target, draft, "the answer")  # delivery after the restart: chunk 1 replaces the draft
    assert (slack.messages[("C1", draft)].text, slack.messages[("C1", draft)].blocks) == ("the answer", None)


async def test_top_level_dm_eyes_then_nothing_or_x(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    for ts, ending in (("11.000001", Status.DONE), ("12.000001", Status.FAILED)):
        target = Target("D1", ChatType.DM, None, ts)
        await channel.status(target, Status.WORKING)
        assert slack.reactions[("D1", ts)] == {"eyes"}
        await channel.status(target, ending)
    assert slack.reactions[("D1", "11.000001")] == set() and slack.reactions[("D1", "12.000001")] == {"x"}
    assert not slack.statuses  # not an assistant thread: no status line


async def test_an_app_token_refused_on_reconnecting_stops_the_channel(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    slack.app_token = "xapp-rotated"  # the token was revoked
    await slack.refresh()
    with pytest.raises(ChannelError, match=r"^channels\.slack\.app_token: Slack refused the app-level token on "
                                           r"reconnecting \(invalid_auth"):
        await asyncio.wait_for(channel.wait_closed(), 5)


async def test_a_bot_token_revoked_while_running_stops_the_channel(slack: FakeSlack, start: Start) -> None:
    channel, _ = await start("socket")
    slack.bot_token = "xoxb-rotated"
    with pytest.raises(SendFailed) as failed:
        await channel.send(Target("D1"), "hello")
    assert not failed.value.permanent  # kept for the restart with a good token
    with pytest.raises(ChannelError, match=r"^channels\.slack\.bot_token: Slack refused the token \(invalid_auth"):
        await asyncio.wait_for(channel.wait_closed(), 5)
