"""Nothing lost, nothing twice, nobody let in: `chatgate run` as a real process, stopped with
real signals (SIGTERM, SIGKILL), against the fake Telegram Bot API and the fake LLM running
in this test process on 127.0.0.1.

Each test starts the bot with ``python -m bot run -c config.yaml`` (``Bot``), drives it
through updates pushed to the fake Telegram, and counts what reached the fakes: the
sendMessage calls to a chat (answered exactly once), the model requests (asked once),
getFile and file downloads, getUpdates offsets (confirmed only once stored).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram, Sent

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "123456:TEST-TOKEN"
DM_USER = 42
GROUP_OK = -1001000000001  # allowed where a test lists it in groups
GROUP_OTHER = -1001000000002  # never allowed
FAILED_SENTENCE = "Something went wrong on my side"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


class Bot:
    """``python -m bot run -c config.yaml`` in a child process; its log in ``tmp/bot.log``.
    The database and workspaces live in ``tmp`` and survive restarts."""

    def __init__(self, tmp: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
        self.tmp, self.llm, self.tg = tmp, llm, tg
        self.db = tmp / "chatgate.db"
        self.workspaces = tmp / "workspaces"
        self.log = tmp / "bot.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.telegram: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}

    def configure(self, *, telegram: dict[str, Any] | None = None, **sections: Any) -> None:
        """``channels.telegram`` keys (default: open DMs and groups), and other top-level sections."""
        self.telegram = telegram if telegram is not None else {"dm_policy": "open", "group_policy": "open"}
        self.extra = sections

    def _config(self) -> Path:
        config = {
            "agent": {"model": "fake-model"},
            "providers": {"openai": {"api_key": "test-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.db)},
            "workspace": {"root": str(self.workspaces)},
            "delivery": {"retry_for": 60},
            "logging": {"level": "INFO"},
            **self.extra,
            "channels": {"console": {"enabled": False},
                         "telegram": {"enabled": True, "token": TOKEN, "base_url": self.tg.api_root,
                                      **self.telegram}},
        }
        path = self.tmp / "config.yaml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        return path

    async def start(self) -> None:
        """Start the process; returns once it polls (a new getUpdates reached the fake)."""
        assert self.proc is None or self.proc.returncode is not None, "already running"
        polls = len(self.tg.get_updates_calls)
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))}
        env["PYTHONPATH"] = str(ROOT)
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "run", "-c", str(self._config()), cwd=self.tmp, env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while len(self.tg.get_updates_calls) <= polls:
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"the bot did not start polling (exit {self.proc.returncode}):\n{self.tail()}")
            await asyncio.sleep(0.05)

    async def terminate(self) -> int:
        """SIGTERM, as a service manager stops it; the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"the bot ignored SIGTERM for {STOP_TIMEOUT} s:\n{self.tail()}") from None

    async def kill(self) -> None:
        """SIGKILL: no cleanup at all."""
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Read the bot's database from outside (WAL: readers never wait for the bot)."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5) as db:
            return list(db.execute(sql, args))


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg:
        b = Bot(tmp_path, llm, tg)
        b.configure()
        try:
            yield b
        finally:
            await b.close()


def sent_to(tg: FakeTelegram, chat_id: int) -> list[Sent]:
    return [s for s in tg.sent if s.chat_id == chat_id]


def calls(tg: FakeTelegram, method: str) -> int:
    return len([c for c in tg.calls if c.method == method])


def prompt(llm: FakeLLM, index: int = -1) -> str:
    return json.dumps(llm.requests[index].body["messages"])


async def answered_once(bot: Bot, chat_id: int, *, timeout: float, quiet: float = 0.7) -> Sent:
    """The chat's one answer: waits for it, then ``quiet`` seconds more for a second one."""
    try:
        await bot.tg.wait_for(lambda: sent_to(bot.tg, chat_id), timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"chat {chat_id} got no answer in {timeout} s; bot log:\n{bot.tail()}") from None
    await asyncio.sleep(quiet)
    sent = sent_to(bot.tg, chat_id)
    assert len(sent) == 1, [s.plain for s in sent]
    return sent[0]


# ----------------------------------------------------------------------------- restarts and outages


async def test_sigterm_mid_answer_then_restart_answers_once(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await bot.start()
    llm.script(Reply.text("once upon a time " * 100, chunk_size=8, delay=0.05))  # ~10 s of streaming
    tg.push(tg.message(DM_USER, "tell me a story", user_id=DM_USER))
    await llm.wait_for_requests(1, timeout=10)
    await asyncio.sleep(0.5)  # mid-stream
    assert await bot.terminate() == 0
    assert llm.requests[0].disconnected.is_set() and not sent_to(tg, DM_USER)
    await bot.start()
    answer = await answered_once(bot, DM_USER, timeout=15)
    assert answer.plain == "echo: tell me a story"
    assert len(llm.requests) == 2  # asked again once, after the restart


@pytest.mark.timeout(90)
async def test_a_15_s_sendmessage_outage_answers_once_and_asks_once(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await bot.start()
    until = tg.fail_for("sendMessage", 15, status=502)
    tg.push(tg.message(DM_USER, "are you there?", user_id=DM_USER))
    answer = await answered_once(bot, DM_USER, timeout=65)
    assert answer.plain == "echo: are you there?" and answer.time >= until
    assert calls(tg, "sendMessage") > 2  # it was retried through the outage
    assert len(llm.requests) == 1


@pytest.mark.timeout(90)
async def test_a_restart_during_the_outage_sends_the_stored_answer(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await bot.start()
    until = tg.fail_for("sendMessage", 15, status=502)
    tg.push(tg.message(DM_USER, "are you there?", user_id=DM_USER))
    await tg.wait_for_calls("sendMessage", 1, timeout=10)  # the answer is stored and failing
    await asyncio.sleep(max(0.0, until - 6 - time.monotonic()))
    assert await bot.terminate() == 0
    await bot.start()
    answer = await answered_once(bot, DM_USER, timeout=65)
    assert answer.plain == "echo: are you there?" and answer.time >= until
    assert len(llm.requests) == 1  # sent from the stored chunks, never regenerated


async def test_sigkill_between_commit_and_send_answers_once_after_restart(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await bot.start()
    tg.hold("sendMessage")
    tg.push(tg.message(DM_USER, "hello", user_id=DM_USER))
    await llm.wait_for_requests(1, timeout=10)
    await asyncio.wait_for(llm.requests[0].finished.wait(), 10)
    await tg.wait_for_calls("sendMessage", 1, timeout=10)  # the send hangs...
    assert bot.query("SELECT COUNT(*) FROM answers WHERE delivered_at IS NULL") == [(1,)]  # ...the answer is stored
    await bot.kill()
    tg.release("sendMessage")
    await bot.start()
    answer = await answered_once(bot, DM_USER, timeout=15)
    assert answer.plain == "echo: hello" and len(llm.requests) == 1


async def test_a_stranger_refused_while_the_notice_hangs_gets_nothing_more_after_sigkill(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    stranger = 666
    bot.configure(telegram={"allow_from": [DM_USER]})  # dm_policy: allowlist, the default
    await bot.start()
    tg.hold("sendMessage")
    tg.push(tg.message(stranger, "let me in", user_id=stranger))
    await tg.wait_for_calls("sendMessage", 1, timeout=10)  # the refusal notice hangs
    await bot.kill()
    tg.release("sendMessage")
    await bot.start()
    await tg.wait_for(lambda: not tg.pending, timeout=5)
    await asyncio.sleep(1.5)  # recovery has had every chance to run it
    notices = sent_to(tg, stranger)
    assert len(notices) <= 1 and all("allowlist" in (n.plain or "") for n in notices)
    assert not llm.requests
    assert not [p for p in bot.workspaces.glob("*") if str(stranger) in p.name]


async def test_files_from_chats_and_senders_not_allowed_are_never_fetched(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    bot.configure(telegram={"dm_policy": "disabled", "group_policy": "allowlist", "groups": [GROUP_OK],
                            "max_download_mb": 1})
    await bot.start()
    small, big = b"quarterly numbers", b"x" * (2 * 1024 * 1024)
    tg.add_file("DOC-S", small, file_path="documents/s.txt")
    tg.add_file("DOC-B", big, file_path="documents/b.zip")
    tg.add_file("PHOTO", b"\xff\xd8jpeg", file_path="photos/p.jpg")
    files: list[dict[str, Any]] = [
        {"document": {"file_id": "DOC-S", "file_name": "s.txt", "mime_type": "text/plain", "file_size": len(small)}},
        {"document": {"file_id": "DOC-B", "file_name": "b.zip", "file_size": len(big)}},  # over max_download_mb
        {"photo": [{"file_id": "PHOTO", "width": 9, "height": 9, "file_size": 6}]},
    ]
    for media in files:
        tg.push(tg.message(GROUP_OTHER, None, user_id=7, caption="@chatgate_bot read this", **media))
        tg.push(tg.message(777, None, user_id=777, caption="read this", **media))  # DMs are disabled
    tg.push(tg.message(GROUP_OK, "@chatgate_bot ping", user_id=8))  # the last update: when it is answered,
    await answered_once(bot, GROUP_OK, timeout=10, quiet=1.0)  # the others were long decided
    assert calls(tg, "getFile") == 0 and calls(tg, "downloadFile") == 0
    assert sent_to(tg, GROUP_OTHER) == [] and sent_to(tg, 777) == [] and tg.documents == []
    assert {a.chat_id for a in tg.actions} <= {GROUP_OK}  # not even "typing…"
    assert len(llm.requests) == 1 and not tg.pending


async def test_a_file_sent_while_the_bot_is_down_is_fetched_after_start(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await bot.start()
    assert await bot.terminate() == 0
    tg.add_file("DOC-1", b"quarterly numbers", file_path="documents/r.txt")
    tg.push(tg.message(DM_USER, None, user_id=DM_USER, caption="read this",
                       document={"file_id": "DOC-1", "file_name": "report.txt", "mime_type": "text/plain",
                                 "file_size": 17}))
    await bot.start()
    await answered_once(bot, DM_USER, timeout=15, quiet=1.5)
    assert calls(tg, "getFile") == 1 and calls(tg, "downloadFile") == 1  # fetched once, not once per start-up path
    saved = bot.workspaces / f"telegram-{DM_USER}" / "inbox" / "report.txt"
    assert saved.read_bytes() == b"quarterly numbers"
    assert len(llm.requests) == 1 and "inbox/report.txt" in prompt(llm)


async def test_messages_sent_while_the_bot_is_down_are_answered_once_each(bot: Bot) -> None:
    """The poller takes them as soon as the channel starts, while start-up recovery looks for
    unanswered messages: each must still be decided once, not once by each."""
    tg, llm = bot.tg, bot.llm
    await bot.start()
    assert await bot.terminate() == 0
    chats = [DM_USER + i for i in range(5)]
    for chat_id in chats:
        tg.push(tg.message(chat_id, f"hello from {chat_id}", user_id=chat_id))
    await bot.start()
    await tg.wait_for(lambda: all(sent_to(tg, c) for c in chats), timeout=15)
    await asyncio.sleep(1.5)
    assert sorted((s.chat_id, s.plain) for s in tg.sent) == [(c, f"echo: hello from {c}") for c in chats]
    assert len(llm.requests) == len(chats)


async def test_an_update_is_not_confirmed_while_the_database_is_locked(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await bot.start()
    locker = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import sqlite3, sys, time\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(7)\n"
        "print(time.monotonic(), flush=True)\n"  # the moment the lock goes (one clock on Linux)
        "db.execute('COMMIT')\n",
        str(bot.db), stdout=asyncio.subprocess.PIPE)
    try:
        assert locker.stdout is not None
        assert await asyncio.wait_for(locker.stdout.readline(), 10) == b"locked\n"
        update_id = tg.push(tg.message(DM_USER, "still there?", user_id=DM_USER))["update_id"]
        unlocked = float(await asyncio.wait_for(locker.stdout.readline(), 15))
        await asyncio.wait_for(locker.wait(), 5)
    finally:
        if locker.returncode is None:
            locker.kill()
            await locker.wait()
    # the bot may store the update the moment the lock goes: only what came before counts
    polls_while_locked = [c for c in tg.get_updates_calls if c.time < unlocked]
    assert all(int(c.params.get("offset") or 0) <= update_id for c in polls_while_locked)
    assert all(s.time > unlocked for s in sent_to(tg, DM_USER))
    answer = await answered_once(bot, DM_USER, timeout=20)
    assert answer.plain == "echo: still there?" and len(llm.requests) == 1
    assert "could not be stored" in bot.tail(200)


@pytest.mark.parametrize("broken", ["inbox", "workspace"])
async def test_an_unexpected_error_sends_one_sentence_stops_typing_and_is_not_rerun(bot: Bot, broken: str) -> None:
    """``inbox``: a regular file where the workspace's inbox should be, so saving the upload
    fails before the run; ``workspace``: a regular file where the workspace should be, so the
    run itself cannot set up."""
    tg, llm = bot.tg, bot.llm
    workspace = bot.workspaces / f"telegram-{DM_USER}"
    if broken == "inbox":
        workspace.mkdir(parents=True)
        (workspace / "inbox").write_text("a regular file where the inbox directory should be")
        tg.add_file("DOC-1", b"quarterly numbers", file_path="documents/r.txt")
        update = tg.message(DM_USER, None, user_id=DM_USER, caption="read this",
                            document={"file_id": "DOC-1", "file_name": "report.txt", "file_size": 17})
    else:
        bot.workspaces.mkdir()
        workspace.write_text("a regular file where the workspace directory should be")
        update = tg.message(DM_USER, "hello", user_id=DM_USER)
    await bot.start()
    tg.push(update)
    answer = await answered_once(bot, DM_USER, timeout=10, quiet=0.5)
    assert (answer.plain or "").startswith(FAILED_SENTENCE) and (answer.plain or "").count(".") <= 2
    typing = len(tg.actions)
    await asyncio.sleep(4.5)  # "typing…" is refreshed every 4 s while a run lives
    assert len(tg.actions) == typing
    assert await bot.terminate() == 0
    await bot.start()
    await asyncio.sleep(1.5)
    assert len(sent_to(tg, DM_USER)) == 1 and calls(tg, "getFile") <= 1 and not llm.requests


# ----------------------------------------------------------------------------- what the model writes


async def test_think_streamed_first_never_shows_in_a_draft(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    bot.configure(telegram={"dm_policy": "open", "streaming": "edit"})
    await bot.start()
    answer = "The answer is 42, and here is why: " + "because it is " * 15
    llm.script(Reply.text(f"<think>the secret plan: flatter them</think>{answer}", chunk_size=4, delay=0.02))
    tg.push(tg.message(DM_USER, "what is the answer?", user_id=DM_USER))
    await tg.wait_for(lambda: any((e.plain or "").strip() == answer.strip() for e in tg.edits)
                      or any((s.plain or "").strip() == answer.strip() for s in tg.sent), timeout=15)
    await asyncio.sleep(0.5)
    shown = [s.text or "" for s in tg.sent] + [e.text for e in tg.edits]
    assert shown and len(tg.sent) == 1  # one draft, edited into the answer
    for text in shown:
        assert "secret" not in text and "think" not in text, text


async def test_text_with_a_lone_surrogate_is_stored_and_answered(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await bot.start()
    tg.push(tg.message(DM_USER, "broken \ud83d emoji", user_id=DM_USER))  # JSON "\ud83d": a lone surrogate
    answer = await answered_once(bot, DM_USER, timeout=10, quiet=0.3)
    assert (answer.plain or "").startswith("echo: broken ") and "emoji" in (answer.plain or "")
    assert len(llm.requests) == 1 and not tg.pending
    assert bot.query("SELECT COUNT(*) FROM inbound WHERE answered_at IS NOT NULL") == [(1,)]
