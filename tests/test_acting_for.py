"""Who a turn acts for, and one gate for every tool call (issue 32, items 1, 3, 4 and 5).

A turn made of several people's messages acts with the least rights among them, and what it
makes that lasts (a scheduled task) carries them all; "Allow for this session" covers one
person for one life of the session; the memory flush and a task's check pass the same gate
(hooks, approvals) as a run's calls; a pre-tool hook never runs in the person's workspace.
Through the real Telegram SDK against the fake Telegram where the platform matters, in
process with a recording channel where it does not.
"""

from __future__ import annotations

import ast
import asyncio
import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.approvals.service import Approvals, ApprovalSettings
from bot.conversation import Conversation
from bot.messages import ChatType
from bot.session_keys import SessionKey
from bot.settings import load_config
from bot.tools import ToolContext, builtin_registry
from bot.tools.gate import ToolGate
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram

pytestmark = pytest.mark.timeout(60)

OWNER, MEMBER, MALLORY = 42, 8, 9
GROUP = -1001234567890
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


class Bot:
    """The whole App with the real Telegram channel against the fake Telegram."""

    def __init__(self, tmp: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
        self.tmp, self.llm, self.tg = tmp, llm, tg
        self.app: App | None = None

    async def start(self, extra: str = "") -> App:
        from adapters.telegram.channel import TelegramChannel

        path = self.tmp / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model, compaction: {{keep_last: 1}}}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}"}}}}
storage: {{path: "{self.tmp / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp / 'workspaces'}"}}
runs: {{debounce_ms: 0}}
channels:
  telegram: {{enabled: true, token: "{self.tg.token}", base_url: "{self.tg.api_root}", dm_policy: open,
             group_policy: open, owners: ["{OWNER}"]}}
{extra}
""")
        config = load_config(path, env={})
        self.app = App(config, {"telegram": TelegramChannel(config.channels.telegram, poll_timeout=1)})
        await self.app.__aenter__()
        return self.app

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.__aexit__(None, None, None)
            self.app = None

    def say(self, text: str, user: int, chat: int = GROUP) -> None:
        mention = f"@{self.tg.username} " if chat == GROUP else ""
        self.tg.push(self.tg.message(chat, f"{mention}{text}", user_id=user, first_name=f"U{user}",
                                     **({"chat_type": "supergroup"} if chat == GROUP else {})))

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(f"file:{self.tmp / 'chatgate.db'}?mode=ro", uri=True) as db:
            return list(db.execute(sql, args))

    async def card(self, n: int = 1) -> tuple[str, int]:
        """(approval id, question message id) of the ``n``-th card once it is shown."""
        async with asyncio.timeout(10):
            while len(rows := self.query("SELECT id, question_id FROM approvals WHERE question_id IS NOT NULL "
                                         "ORDER BY asked_at")) < n:
                await asyncio.sleep(0.05)
        approval, question = rows[n - 1]
        return approval, int(question)

    async def until(self, check: Any, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.05)

    def sent_texts(self, chat: int) -> list[str]:
        return [s.plain or "" for s in self.tg.sent if str(s.chat_id) == str(chat)]


@pytest.fixture
async def bot(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> AsyncIterator[Bot]:
    b = Bot(tmp_path, llm, tg)
    yield b
    await b.stop()


def offered(llm: FakeLLM, index: int) -> set[str]:
    return {t["function"]["name"] for t in llm.requests[index].body.get("tools", [])}


# ----------------------------------------------------------------- 1. a batch's job, least rights


async def test_a_members_request_batched_with_an_owners_message_never_runs_as_the_owner(bot: Bot) -> None:
    """Item 1: a member's "run this with exec every morning" and the owner's next message are
    answered as one turn (queue_mode collect); the schedule tool's task records both people and
    runs as a non-owner: exec not offered, its calls asked for approval like the member's."""
    llm = bot.llm
    await bot.start("tools: {exec: {enabled: true, sandbox: none}}")
    llm.script(Reply.text("Working on it, one moment please.", delay=0.15),  # busy: the next two wait
               Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "1s",
                                                   "text": "Run uptime with exec and report."})]),
               Reply.text("Made it."),
               Reply.text("The task ran."))
    bot.say("hello", MEMBER)
    await llm.wait_for_requests(1, timeout=5)
    bot.say("every morning run uptime with exec", MEMBER)
    bot.say("thanks!", OWNER)
    await llm.wait_for_requests(4, timeout=15)
    assert "exec" not in offered(llm, 1)  # the batched turn itself: a member's message is in it
    [(creator, people)] = bot.query("SELECT creator, people FROM jobs")
    assert creator == str(OWNER) and people.split() == [str(MEMBER)]
    task_request = llm.requests[3]
    assert "Run uptime with exec" in json.dumps(task_request.body["messages"])
    assert "exec" not in offered(llm, 3)  # before the fix: offered, as the job ran as the owner
    await bot.until(lambda: bot.query("SELECT outcome FROM occurrences") == [("completed",)])


async def test_the_owners_own_task_still_runs_as_the_owner(bot: Bot) -> None:
    llm = bot.llm
    await bot.start("tools: {exec: {enabled: true, sandbox: none}}")
    llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "1s",
                                                   "text": "Run uptime."})]),
               Reply.text("Made it."), Reply.text("Ran."))
    bot.say("in a second run uptime", OWNER)
    await llm.wait_for_requests(3, timeout=10)
    assert bot.query("SELECT creator, people FROM jobs") == [(str(OWNER), "")]
    assert "exec" in offered(llm, 0) and "exec" in offered(llm, 2)


# ----------------------------------------------------------------- 3. session grants


WRITE = Call("write_file", {"path": "note.txt", "content": "hello"}, id="w1")


def written(bot: Bot) -> list[str]:
    return sorted(p.read_text() for p in (bot.tmp / "workspaces").glob("*/note.txt"))


async def test_allow_for_this_session_covers_the_person_it_was_asked_for_only(bot: Bot) -> None:
    """Item 3: in a group, a member's "Allow for this session" counts as once; an owner's covers
    the member whose call it was, never another member (before: the whole chat, for ever)."""
    llm = bot.llm
    await bot.start("tools: {approval: {write_file: ask}}")
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
    bot.say("save hello", MEMBER)
    approval, question = await bot.card()
    assert bot.tg.buttons(GROUP, question) == [f"ap:{approval}:o", f"ap:{approval}:s", f"ap:{approval}:d"]
    labels = [b["text"] for row in bot.tg.messages[(GROUP, question)]["reply_markup"]["inline_keyboard"]
              for b in row]
    assert labels == ["Allow once", "Session (owners)", "Deny"]
    bot.tg.press(GROUP, question, f"ap:{approval}:s", user_id=MEMBER, first_name="Member")
    await bot.until(lambda: written(bot) == ["hello"])
    await bot.until(lambda: "allowed once" in str(bot.tg.messages[(GROUP, question)]["text"]))
    assert bot.query("SELECT COUNT(*) FROM approval_grants") == [(0,)]

    # the member asks again: a card again (nothing was allowed for the session); the owner allows for the session
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved again."))
    bot.say("save hello again", MEMBER)
    approval, question = await bot.card(2)
    bot.tg.press(GROUP, question, f"ap:{approval}:s", user_id=OWNER, first_name="Owner")
    await bot.until(lambda: "allowed for this session" in str(bot.tg.messages[(GROUP, question)]["text"]))
    [(holder,)] = bot.query("SELECT holder FROM approval_grants")
    assert holder.endswith(f":telegram:{MEMBER}")

    # the member is covered now; Mallory is not (before: the session's grant covered everyone)
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved a third time."))
    bot.say("and once more", MEMBER)
    await bot.until(lambda: any("Saved a third time." in t for t in bot.sent_texts(GROUP)))
    assert len(bot.query("SELECT id FROM approvals")) == 2
    llm.script(Reply.tool_calls([Call("write_file", {"path": "note.txt", "content": "mallory"}, id="m1")]),
               Reply.text("Mallory's done."))
    bot.say("write mallory into note.txt", MALLORY)
    await bot.card(3)
    assert written(bot) == ["hello"]


async def test_a_session_grant_ends_with_new_and_with_its_hours(bot: Bot) -> None:
    llm = bot.llm
    await bot.start("tools: {approval: {write_file: ask}, approval_session_hours: 0.001}")  # 3.6 s
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
    bot.say("save hello", MEMBER, chat=MEMBER)
    approval, question = await bot.card()
    labels = [b["text"] for row in bot.tg.messages[(MEMBER, question)]["reply_markup"]["inline_keyboard"]
              for b in row]
    assert labels == ["Allow once", "Allow for this session", "Deny"]
    bot.tg.press(MEMBER, question, f"ap:{approval}:s", user_id=MEMBER)
    await bot.until(lambda: any("Saved." in t for t in bot.sent_texts(MEMBER)))
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved, no question."))
    bot.say("again", MEMBER, chat=MEMBER)
    await bot.until(lambda: any("Saved, no question." in t for t in bot.sent_texts(MEMBER)))
    assert len(bot.query("SELECT id FROM approvals")) == 1  # covered by the session's grant
    bot.say("/new", MEMBER, chat=MEMBER)
    await bot.until(lambda: len(bot.sent_texts(MEMBER)) >= 4)
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Asked again."))
    bot.say("after new", MEMBER, chat=MEMBER)
    approval, question = await bot.card(2)  # a new session: asked again
    bot.tg.press(MEMBER, question, f"ap:{approval}:s", user_id=MEMBER)
    await bot.until(lambda: any("Asked again." in t for t in bot.sent_texts(MEMBER)))
    await asyncio.sleep(3.8)  # past approval_session_hours
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Expired."))
    bot.say("later", MEMBER, chat=MEMBER)
    await bot.card(3)


# ----------------------------------------------------------------- 4. one gate: the flush and checks


def hook(marker: Path, refuse: str) -> str:
    """A pre-tool hook that records each call it sees and refuses the tools in ``refuse``."""
    script = (f"import json,sys; d=json.load(sys.stdin); open({str(marker)!r},'a').write(d['tool']+'\\n'); "
              f"sys.exit(1 if d['tool'] in {refuse.split()!r} else 0)")
    return f"hooks: {{pre_tool: [{{run: {json.dumps(f'{sys.executable} -c {json.dumps(script)}')}}}]}}"


async def compact_with_a_flush(bot: Bot) -> None:
    """/compact in the member's DM, its memory flush writing memory/notes.md; waits for the reply."""
    before = len(bot.sent_texts(MEMBER))
    flush = Call("write_file", {"path": "memory/notes.md", "content": "teal"}, id="f1")
    bot.llm.script(Reply.tool_calls([flush]), Reply.text("NO_REPLY"), Reply.text("A summary."))
    bot.say("/compact", MEMBER, chat=MEMBER)
    await bot.until(lambda: len(bot.sent_texts(MEMBER)) > before, timeout=15)


async def test_the_memory_flush_passes_the_hooks_and_never_runs_a_call_that_needs_approval(bot: Bot) -> None:
    """Item 4: /compact's memory flush wants to write: a pre-tool hook sees the call (and refuses
    it); with ``approval: ask`` and no hook, it is not run (nobody is asked during a flush)."""
    llm = bot.llm
    marker = bot.tmp / "hook-calls"
    await bot.start(f"tools: {{exec: {{sandbox: none}}}}\n{hook(marker, 'write_file')}")
    llm.script(Reply.text("Noted."), Reply.text("Noted too."))
    bot.say("my favourite colour is teal", MEMBER, chat=MEMBER)
    bot.say("and I like tea", MEMBER, chat=MEMBER)
    await bot.until(lambda: len(bot.sent_texts(MEMBER)) >= 2)
    await compact_with_a_flush(bot)
    assert marker.read_text().split() == ["write_file"]  # before the fix: no hook ran, the file was written
    assert not list((bot.tmp / "workspaces").glob("*/memory/notes.md"))
    assert "refused by a pre-tool hook" in json.dumps(llm.requests[3].body["messages"])


async def test_the_memory_flush_skips_a_call_that_needs_approval(bot: Bot) -> None:
    llm = bot.llm
    await bot.start("tools: {approval: {write_file: ask}}")
    llm.script(Reply.text("Noted."))
    bot.say("my favourite colour is teal", MEMBER, chat=MEMBER)
    await bot.until(lambda: len(bot.sent_texts(MEMBER)) >= 1)
    await compact_with_a_flush(bot)
    assert bot.query("SELECT COUNT(*) FROM approvals") == [(0,)]  # no card: nobody answers a flush
    assert not list((bot.tmp / "workspaces").glob("*/memory/notes.md"))
    assert "nobody can give it here: it was not run" in json.dumps(llm.requests[2].body["messages"])


async def test_a_tasks_check_command_passes_the_pre_tool_hooks(bot: Bot) -> None:
    """Item 4: a task's check_command is a call of exec to the hooks: refused there, the
    occurrence fails and the model is not called (before: the hooks never saw it)."""
    llm = bot.llm
    marker = bot.tmp / "hook-calls"
    await bot.start(f"tools: {{exec: {{enabled: true, sandbox: none}}}}\n{hook(marker, 'exec')}")
    llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "1s",
                                                   "text": "Tell me.", "check_command": "echo go"})]),
               Reply.text("Made it."))
    bot.say("in a second tell me if anything", OWNER, chat=OWNER)
    await bot.until(lambda: bot.query("SELECT outcome FROM occurrences") == [("failed",)], timeout=15)
    assert marker.read_text().split() == ["schedule", "exec"]  # the run's call, then the check's
    assert len(llm.requests) == 2  # the task's model call never came


def test_every_tool_context_the_bot_makes_carries_the_gate() -> None:
    """The gate is not optional where the bot calls tools: every ToolContext built in bot/ names it."""
    missing = []
    for path in (ROOT / "bot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ToolContext":
                if not any(k.arg == "gate" for k in node.keywords):
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not missing, f"ToolContext without its gate: {missing}"


# ----------------------------------------------------------------- 5. hooks never in the workspace


async def test_a_hook_runs_in_an_empty_folder_not_the_persons_workspace(bot: Bot) -> None:
    """Item 5: files the person wrote (a json.py that python3 -c would import first) cannot make
    a hook say yes: the hook runs in an empty, read-only folder of its own."""
    llm = bot.llm
    marker = bot.tmp / "hook-calls"
    await bot.start(f"tools: {{exec: {{sandbox: none}}}}\n{hook(marker, 'write_file')}")
    llm.script(Reply.text("Hello."))
    bot.say("hi", MEMBER, chat=MEMBER)
    await bot.until(lambda: len(bot.sent_texts(MEMBER)) >= 1)
    [workspace] = [p for p in (bot.tmp / "workspaces").iterdir() if p.is_dir()]
    (workspace / "json.py").write_text("import sys\nsys.exit(0)\n")  # as an upload or exec could leave it
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Done."))
    bot.say("save hello", MEMBER, chat=MEMBER)
    await bot.until(lambda: any("Done." in t for t in bot.sent_texts(MEMBER)))
    assert "refused by a pre-tool hook" in json.dumps(llm.requests[2].body["messages"])
    assert not (workspace / "note.txt").exists()  # before the fix: the planted json.py let it through


async def test_in_the_sandbox_a_hooks_folder_is_empty_and_read_only(bot: Bot) -> None:
    """Item 5 under bubblewrap: the hook's /workspace is an empty folder it cannot write."""
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    llm = bot.llm
    check = 'cat >/dev/null; test -z "$(ls -A)" && ! touch probe 2>/dev/null'
    await bot.start(f"hooks: {{pre_tool: [{{run: {json.dumps(check)}, tools: [write_file]}}]}}")
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Done."))
    bot.say("save hello", MEMBER, chat=MEMBER)
    await bot.until(lambda: any("Done." in t for t in bot.sent_texts(MEMBER)))
    assert "pre-tool hook" not in json.dumps(llm.requests[1].body["messages"])  # before: AGENTS.md & co. were there
    assert written(bot) == ["hello"]


# ----------------------------------------------------------------- 12. the gate's lease check


async def test_a_tool_that_acts_is_not_run_once_another_instance_took_the_lane(tmp_path: Path) -> None:
    """Item 12 at the gate: an instance paused past its lease learns it before a tool with side
    effects runs (``still_holds``), and runs none; tools that only read go on. Nothing is asked
    of the database where nobody can answer an approval (the flush runs after the lane)."""
    class Lost:
        asked: list[str] = []

        async def still_holds(self, session_key: str) -> bool:
            self.asked.append(session_key)
            return False

        async def running_elsewhere(self, session_key: str) -> bool:
            return True

        async def decide_elsewhere(self, *args: Any) -> str | None:
            raise LookupError

    lost = Lost()
    gate = ToolGate(holds=lost)
    gate.add(Approvals(None, {}, ApprovalSettings(), is_owner=lambda p, u: False, elsewhere=lost))  # type: ignore[arg-type]
    conversation = Conversation.of_key(SessionKey("main", ChatType.DM, "7", "telegram"))
    ctx = ToolContext(tmp_path, conversation, "r1", "main", "7", gate=gate)
    tools = builtin_registry()
    write, read = tools.get("write_file"), tools.get("read_file")
    assert write is not None and read is not None
    refusal = await gate.permit(ctx, write, "c1", {"path": "a", "content": "b"})
    assert refusal == "write_file was not run: another instance has taken this conversation over."
    assert await gate.permit(ctx, read, "c2", {"path": "a"}) is None
    assert await gate.permit(replace(ctx, unattended=True), write, "c3", {"path": "a", "content": "b"}) is None
    assert lost.asked == [conversation.session_key]
