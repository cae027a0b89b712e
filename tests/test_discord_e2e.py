"""Discord end to end: ``chatgate run -c config.yaml`` as its own process, the real discord.py
in it against the fake Discord, the real OpenAI SDK against the fake LLM (both fakes here)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.discord_server import FakeDiscord, Guild, Sent
from tests.fakes.llm_server import FakeLLM, Reply

ROOT = Path(__file__).resolve().parent.parent
USER = 4242
pytestmark = pytest.mark.timeout(60)


class Bot:
    """``python -m bot run -c CONFIG`` in a child process, its log in ``log``."""

    def __init__(self, tmp: Path, dc: FakeDiscord, llm: FakeLLM, guild: Guild) -> None:
        self.tmp, self.dc, self.llm, self.guild = tmp, dc, llm, guild
        self.log = tmp / "bot.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self, *, connect: bool = True, **discord: Any) -> None:
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "test-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.tmp / "chatgate.db")},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "channels": {"console": {"enabled": False},
                         "discord": {"enabled": True, "token": self.dc.token, "api_base": self.dc.api_base,
                                     "gateway_url": self.dc.gateway_url, "dm_policy": "open",
                                     "guilds": [str(self.guild.id)], **discord}},
            "logging": {"level": "INFO"},
        }
        path = self.tmp / "config.yaml"
        path.write_text(json.dumps(config))
        connected = len(self.dc.identifies) + len(self.dc.resumes)
        self.starts += 1
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "run", "-c", str(path), cwd=ROOT, stdin=asyncio.subprocess.DEVNULL,
                stdout=log, stderr=log)
        if not connect:
            return
        try:
            await self.dc.wait_connected(connected + 1, timeout=20)
            # Start-up is over (recovery included): the tests' messages are live ones.
            async with asyncio.timeout(20):
                while self.log.read_text(errors="replace").count("chatgate running") < self.starts:
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"the bot did not connect:\n{self.tail()}") from None

    async def stop(self) -> int | None:
        if self.proc is None or self.proc.returncode is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.terminate()
        try:
            return await asyncio.wait_for(self.proc.wait(), 15)
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@pytest.fixture
async def bot(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Bot]:
    async with FakeDiscord() as dc:
        guild = dc.add_guild(channels={"general": 0}, threads={"t": "general"})
        b = Bot(tmp_path, dc, llm, guild)
        try:
            yield b
        finally:
            await b.stop()


def mention(dc: FakeDiscord, channel: int, text: str, user: int = USER) -> dict[str, Any]:
    return dc.say(channel, user, f"<@{dc.bot_id}> {text}", mentions=[dc.bot_id])


async def sent_settled(dc: FakeDiscord, n: int, quiet: float = 0.5, timeout: float = 15) -> list[Sent]:
    """The first ``n`` sent messages, after ``quiet`` seconds in which nothing more came."""
    await dc.wait_for_sent(n, timeout)
    await asyncio.sleep(quiet)
    return dc.sent


async def test_dm_and_a_mention_in_a_channel_are_answered(bot: Bot) -> None:
    dc = bot.dc
    await bot.start()
    dc.dm(USER, "hello there")
    [dm] = await dc.wait_for_sent(1)
    assert dm.content == "echo: hello there" and dm.channel_id == dc.dm_channel(USER)
    assert "message_reference" not in dm.payload
    general = bot.guild.channel("general")
    dc.say(general, USER, "ambient chatter")
    trigger = mention(dc, general, "what now?")
    await dc.wait_for_sent(2)
    answer = dc.sent[1]
    assert answer.channel_id == general and "what now?" in answer.content
    assert answer.payload["message_reference"]["message_id"] == int(trigger["id"])
    assert len(bot.llm.requests) == 2  # the ambient message ran nothing


async def test_a_thread_is_its_own_session(bot: Bot) -> None:
    dc = bot.dc
    await bot.start()
    mention(dc, bot.guild.channel("t"), "in the thread")
    [sent] = await dc.wait_for_sent(1)
    assert sent.channel_id == bot.guild.channel("t") and "in the thread" in sent.content


async def test_a_long_answer_with_a_code_block_is_chunked(bot: Bot) -> None:
    dc, llm = bot.dc, bot.llm
    code = "\n".join(f"line_{i} = {i} * 2  # a comment to make the line longer" for i in range(40))
    prose = " ".join(["Some words that go on for a while."] * 60)
    answer = f"{prose}\n\n```python\n{code}\n```\n\n{prose}"
    assert len(answer) > 5000
    llm.script(Reply.text(answer, chunk_size=400))
    await bot.start()
    dc.dm(USER, "write a lot")
    sent = await sent_settled(dc, 3)
    assert 3 <= len(sent) <= 8 and not any(s.files for s in sent)
    assert all(len(s.content) <= 2000 and s.content.count("\n") + 1 <= 17 for s in sent)
    assert all(s.content.count("```") % 2 == 0 for s in sent)  # code blocks closed and reopened
    assert "line_39 = 39 * 2" in "".join(s.content for s in sent)
    assert len(bot.llm.requests) == 1


async def test_an_answer_above_eight_messages_arrives_as_a_file(bot: Bot) -> None:
    dc, llm = bot.dc, bot.llm
    answer = "\n\n".join(f"Paragraph {i}. " + "Words and more words. " * 40 for i in range(30))
    llm.script(Reply.text(answer, chunk_size=2000))
    await bot.start()
    mention(dc, bot.guild.channel("general"), "write a book")
    sent = await sent_settled(dc, 1, quiet=1.0)
    assert len(sent) <= 2  # a short summary, and the file
    [(name, data)] = sent[-1].files
    assert name.endswith(".md") and b"Paragraph 29." in data
    assert all(s.payload["allowed_mentions"] == {"parse": [], "replied_user": True} for s in sent)


async def test_the_model_can_never_ping_anyone(bot: Bot) -> None:
    dc, llm = bot.dc, bot.llm
    llm.script(Reply.text(f"Hey @everyone and @here, ask <@{USER + 1}> or <@&77>!"))
    await bot.start()
    mention(dc, bot.guild.channel("general"), "ping them all")
    [sent] = await dc.wait_for_sent(1)
    assert sent.payload["allowed_mentions"] == {"parse": [], "replied_user": True}
    assert "@everyone" not in sent.content and "@here" not in sent.content  # and the dialect defuses them too


async def test_no_reply_sends_nothing_and_typing_stops(bot: Bot) -> None:
    dc, llm = bot.dc, bot.llm
    llm.script(Reply.text("NO_REPLY", delay=0.2))
    await bot.start()
    mention(dc, bot.guild.channel("general"), "say nothing")
    await llm.wait_for_requests(1, timeout=10)
    await dc.wait_for(lambda: dc.typing, timeout=10)
    await asyncio.sleep(10)  # longer than one typing refresh (8 s)
    typed = len(dc.typing)
    await asyncio.sleep(1)
    assert not dc.sent and len(dc.typing) == typed and typed <= 2


@pytest.mark.parametrize("how", ["text", "slash"])
async def test_stop_ends_a_streaming_run(bot: Bot, how: str) -> None:
    dc, llm = bot.dc, bot.llm
    llm.script(Reply.text("word " * 2000, chunk_size=5, delay=0.05))
    await bot.start(streaming="edit")
    general = bot.guild.channel("general")
    mention(dc, general, "write an essay")
    await llm.wait_for_requests(1, timeout=10)
    await dc.wait_for(lambda: dc.sent, timeout=10)  # the draft is out: it streams
    if how == "text":
        mention(dc, general, "/stop")
    else:
        await dc.wait_for(lambda: dc.commands, timeout=5)
        dc.slash("stop", general, USER)
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 10)
    await dc.wait_for(lambda: any("Stopped" in (s.content or "") for s in dc.sent), timeout=10)
    if how == "slash":
        assert any(body == {"type": 5} for _, body in dc.callbacks)
    edits = len(dc.edits)
    await asyncio.sleep(2)
    assert len(dc.edits) == edits  # the draft no longer moves
    draft = [e for e in dc.edits if e.message_id == dc.sent[0].message_id]
    assert all(b.at - a.at >= 0.9 for a, b in zip(draft, draft[1:]))  # at most one edit a second
    assert all(e.payload["allowed_mentions"] == {"parse": [], "replied_user": True} for e in dc.edits)


async def test_a_run_in_flight_is_delivered_once_across_a_reconnect(bot: Bot) -> None:
    dc, llm = bot.dc, bot.llm
    llm.script(Reply.text("the slow answer", chunk_size=2, delay=0.2))
    await bot.start()
    dc.dm(USER, "take your time")
    await llm.wait_for_requests(1, timeout=10)
    dc.drop()
    await dc.wait_connected(2, timeout=20)
    [sent] = await sent_settled(dc, 1, quiet=1.0)
    assert sent.content == "the slow answer"
    dc.dm(USER, "and after")
    await dc.wait_for_sent(2)
    assert [s.content for s in dc.sent] == ["the slow answer", "echo: and after"]


async def test_a_run_in_flight_is_delivered_once_across_a_silent_gateway(bot: Bot) -> None:
    dc, llm = bot.dc, bot.llm
    dc.heartbeat_ms = 300  # so Discord's zombie rule (no ACK between two heartbeats) acts within seconds
    llm.script(Reply.text("the slow answer", chunk_size=2, delay=0.3))
    await bot.start()
    dc.dm(USER, "take your time")
    await llm.wait_for_requests(1, timeout=10)
    dc.silence()  # the socket stays open; nothing comes back
    dc.dm(USER, "said while it was silent")
    await dc.wait_for(lambda: dc.resumes and dc.live, timeout=15)
    sent = await sent_settled(dc, 2, quiet=1.0, timeout=20)
    assert sorted(s.content for s in sent) == ["echo: said while it was silent", "the slow answer"]
    assert "no heartbeat ACK" in bot.log.read_text()


async def test_slash_commands_are_synced_once_across_restarts(bot: Bot) -> None:
    await bot.start()
    await bot.stop()
    await bot.start()
    await bot.dc.wait_for(lambda: bot.dc.command_gets >= 2, timeout=10)
    assert len(bot.dc.command_puts) == 1


async def test_a_refused_token_stops_with_one_line(bot: Bot) -> None:
    await bot.start(connect=False, token="another-token")
    assert bot.proc is not None
    code = await asyncio.wait_for(bot.proc.wait(), 15)
    lines = [line for line in bot.log.read_text().splitlines() if "channels.discord.token" in line]
    assert code != 0 and lines, bot.tail()


async def test_a_message_during_start_up_is_answered_once(bot: Bot) -> None:
    dc = bot.dc
    await bot.start(connect=False)
    await dc.wait_connected(1, timeout=20)
    dc.dm(USER, "right away")  # before start-up recovery has run
    await sent_settled(dc, 1, quiet=2.0)
    assert [s.content for s in dc.sent] == ["echo: right away"] and len(bot.llm.requests) == 1


async def test_files_are_fetched_only_for_messages_that_run(bot: Bot) -> None:
    dc, llm = bot.dc, bot.llm
    await bot.start(dm_policy="allowlist", allow_from=[str(USER)])
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    stranger = USER + 1
    dc.dm(stranger, "take this", attachments=[dc.attachment("secret.pdf", b"%PDF-1.4 x", "application/pdf")])
    dc.dm(USER, "look", attachments=[dc.attachment("cat.png", png, "image/png"),
                                     dc.attachment("notes.txt", b"remember the milk", "text/plain")])
    await llm.wait_for_requests(1, timeout=15)
    await asyncio.sleep(1.0)
    downloads = [path for _, path in dc.requests if path.startswith("/attachments")]
    body = json.dumps(llm.requests[0].body)
    assert "image" in body and "notes.txt" in body
    assert (bot.tmp / "workspaces" / f"discord-{USER}" / "inbox" / "notes.txt").read_bytes() == b"remember the milk"
    assert any(path.endswith("/notes.txt") for path in downloads)
    assert not any("secret.pdf" in path for path in downloads)  # the stranger's file was never fetched
    assert len(llm.requests) == 1


async def test_a_file_over_the_cap_is_refused_without_downloading(bot: Bot) -> None:
    dc = bot.dc
    await bot.start(max_download_mb=1)
    dc.dm(USER, "big one", attachments=[dc.attachment("huge.zip", b"PK" + b"\x00" * 100, "application/zip",
                                                      size=30 * 1024 * 1024)])
    [sent] = await sent_settled(dc, 1)
    assert "huge.zip" in sent.content and not bot.llm.requests
    assert not [path for _, path in dc.requests if path.startswith("/attachments")]


async def test_a_burst_is_answered_once_each_and_never_blocks_the_heartbeat(bot: Bot) -> None:
    dc = bot.dc
    dc.heartbeat_ms = 500  # a heartbeat every half second: a blocked loop would show at once
    await bot.start()
    for i in range(100):  # a hundred people at once (one each: a busy session would batch them)
        dc.dm(20_000 + i, f"burst {i}")
    sent = await sent_settled(dc, 100, quiet=1.0, timeout=50)
    assert sorted(s.content for s in sent) == sorted(f"echo: burst {i}" for i in range(100))
    log = bot.log.read_text(errors="replace")
    assert "heartbeat blocked" not in log and "Can't keep up" not in log and "stopped responding" not in log
    assert len(dc.identifies) == 1 and not dc.resumes
