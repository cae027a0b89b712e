"""Approvals end to end in the core: a channel that asks -> the intake -> the run waiting for a press.

The platform side (buttons on Telegram, Slack, Discord, the terminal) has its own tests;
here a channel that keeps its questions in memory stands in for them, so that what the
core decides is tested alone: who may press, the run it is bound to, timeouts, /stop,
grants, restarts, hooks, the text fallback.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.capabilities.panels import ApprovalSource
from bot.channels import Choice
from bot.conversation import Conversation
from bot.errors import ConfigError
from bot.llm import ToolCall, ToolResult
from bot.messages import ChatType, InboundMessage, Sender, Target
from bot.settings import Config, load_config
from bot.tools import ToolContext, builtin_registry
from bot.tools.approval import ApprovalRules, call_shape, describe_call, parse_choice
from bot.tools.base import Tool
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import Call, FakeLLM, Reply


@dataclass
class Question:
    to: Target
    text: str
    choices: tuple[Choice, ...]
    id: str
    closed: str | None = None


@dataclass
class AskingChannel(RecordingChannel):
    """A recording channel that ``Asks``: questions in memory, presses injected by the test."""

    questions: list[Question] = field(default_factory=list)
    press_answers: list[tuple[str, str | None]] = field(default_factory=list)  # (presser, text)
    closes: dict[str, str] = field(default_factory=dict)  # question id -> its last text (any process's)

    def __post_init__(self) -> None:
        RecordingChannel.__init__(self)

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        question = Question(to, text, tuple(choices), f"q{len(self.questions) + 1}")
        async with self._changed:
            self.questions.append(question)
            self._changed.notify_all()
        return question.id

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        async with self._changed:
            self.press_answers.append((press.sender.id, text))
            self._changed.notify_all()

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        async with self._changed:
            self.closes[question_id] = text
            for question in self.questions:
                if question.id == question_id:
                    question.closed = text
            self._changed.notify_all()

    async def wait(self, predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), timeout)

    async def question(self, n: int = 1) -> Question:
        await self.wait(lambda: len(self.questions) >= n)
        return self.questions[n - 1]

    async def press(self, question: Question, label: str, user: str = "u1", chat: str = "u1") -> None:
        choice = next(c for c in question.choices if c.label == label)
        await self.inject(InboundMessage("test", "bot", chat, ChatType.DM, Sender(user, f"User {user}"), choice.id,
                                         f"press-{time.monotonic_ns()}", reply_to=question.id))


def make_config(tmp_path: Path, llm: FakeLLM, extra: str = "") -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
agent: {{provider: openai, model: fake-model}}
providers:
  openai: {{api_key: test-key, base_url: "{llm.openai_base_url}", max_retries: 0, timeout: 10}}
storage: {{path: "{tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
runs: {{debounce_ms: 0}}
tools:
  approval: {{write_file: ask}}
{extra}
""")
    return load_config(path, env={})


@pytest.fixture
async def running(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[App, AskingChannel]]:
    channel = AskingChannel()
    app = App(make_config(tmp_path, llm), {"test": channel})
    async with app:
        yield app, channel


WRITE = Call("write_file", {"path": "note.txt", "content": "hello"}, id="w1")


def tool_results(llm: FakeLLM, index: int) -> list[str]:
    return [m["content"] for m in llm.requests[index].body["messages"] if m["role"] == "tool"]


def written(tmp_path: Path) -> list[str]:
    return [p.read_text() for p in (tmp_path / "workspaces").glob("*/note.txt")]


async def test_allow_once_runs_the_call_once_and_closes_the_card(running: tuple[App, AskingChannel], llm: FakeLLM,
                                                                  tmp_path: Path) -> None:
    app, channel = running
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
    await channel.inject(dm("save hello"))
    question = await channel.question()
    assert "write_file" in question.text and "note.txt" in question.text
    assert [c.label for c in question.choices] == ["Allow once", "Allow for this session", "Deny"]
    assert written(tmp_path) == []  # waits
    await channel.press(question, "Allow once")
    await channel.wait_for_replies(1)
    assert channel.texts() == ["Saved."] and written(tmp_path) == ["hello"]
    assert channel.press_answers == [("u1", None)]
    await channel.wait(lambda: question.closed is not None)
    assert question.closed is not None and "allowed once by User u1" in question.closed
    traces = await app.store.traces()
    spans = [s for s in traces[0].spans if s.kind.value == "approval"]
    assert len(spans) == 1 and "allowed (once) by User u1" in spans[0].preview


async def test_deny_gives_the_model_a_denied_result_and_no_second_card(running: tuple[App, AskingChannel],
                                                                        llm: FakeLLM, tmp_path: Path) -> None:
    _, channel = running
    again = Call("write_file", {"path": "note.txt", "content": "hello"}, id="w2")
    llm.script(Reply.tool_calls([WRITE]), Reply.tool_calls([again]), Reply.text("Not saved."))
    await channel.inject(dm("save hello"))
    await channel.press(await channel.question(), "Deny")
    await channel.wait_for_replies(1)
    assert "The person denied write_file" in tool_results(llm, 1)[0]
    assert "denied earlier in this run" in tool_results(llm, 2)[-1]  # the retry is refused without asking
    assert len(channel.questions) == 1 and written(tmp_path) == []
    assert "denied by User u1" in (channel.questions[0].closed or "")


async def test_allow_for_this_session_skips_the_next_card_of_that_session_only(
        running: tuple[App, AskingChannel], llm: FakeLLM, tmp_path: Path) -> None:
    _, channel = running
    llm.script(Reply.tool_calls([WRITE]), Reply.text("One."), Reply.tool_calls([WRITE]), Reply.text("Two."),
               Reply.tool_calls([WRITE]), Reply.text("Three."))
    await channel.inject(dm("first"))
    await channel.press(await channel.question(), "Allow for this session")
    await channel.wait_for_replies(1)
    await channel.inject(dm("second"))
    await channel.wait_for_replies(2)
    assert len(channel.questions) == 1  # the session's grant: no card
    await channel.inject(dm("third", user="u2"))  # another person's session asks again
    question = await channel.question(2)
    await channel.press(question, "Allow once", user="u2", chat="u2")
    await channel.wait_for_replies(3)
    assert channel.texts() == ["One.", "Two.", "Three."]


async def test_always_allow_survives_a_restart_for_the_exact_call(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm, "  allow_always: true")
    channel = AskingChannel()
    async with App(config, {"test": channel}):
        llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
        await channel.inject(dm("save"))
        question = await channel.question()
        assert "Always allow" in [c.label for c in question.choices]
        await channel.press(question, "Always allow")
        await channel.wait_for_replies(1)
    channel = AskingChannel()
    other = Call("write_file", {"path": "note.txt", "content": "changed"}, id="w3")
    async with App(config, {"test": channel}):
        llm.script(Reply.tool_calls([WRITE]), Reply.text("Again."), Reply.tool_calls([other]), Reply.text("Other."))
        await channel.inject(dm("save again"))
        await channel.wait_for_replies(1)
        assert channel.questions == []  # the same call: remembered
        await channel.inject(dm("save other"))
        await channel.question()  # different arguments: asked
        await channel.press(channel.questions[0], "Deny")
        await channel.wait_for_replies(2)


async def test_a_press_by_someone_else_changes_nothing(tmp_path: Path, llm: FakeLLM) -> None:
    channel = AskingChannel()
    async with App(make_config(tmp_path, llm, "  approvers: [requester]"), {"test": channel}):
        llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
        await channel.inject(dm("save"))
        question = await channel.question()
        await channel.press(question, "Allow once", user="stranger")
        await channel.wait(lambda: len(channel.press_answers) == 1)
        assert channel.press_answers[0] == ("stranger", "Only the person who asked (or an owner) can answer this.")
        assert question.closed is None and written(tmp_path) == []
        await channel.press(question, "Allow once")
        await channel.wait_for_replies(1)
        assert written(tmp_path) == ["hello"]


async def test_stop_ends_the_wait_at_once_and_a_late_press_runs_nothing(running: tuple[App, AskingChannel],
                                                                       llm: FakeLLM, tmp_path: Path) -> None:
    _, channel = running
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
    await channel.inject(dm("save"))
    question = await channel.question()
    started = time.monotonic()
    await channel.inject(dm("/stop"))
    await channel.wait_for_replies(1)
    assert channel.texts() == ["Stopped."] and time.monotonic() - started < 1.0
    await channel.wait(lambda: question.closed is not None)
    assert "expired" in (question.closed or "")
    await channel.press(question, "Allow once")
    await channel.wait(lambda: len(channel.press_answers) == 1)
    assert channel.press_answers == [("u1", "This question has expired; nothing was run.")]
    await asyncio.sleep(0.2)
    assert written(tmp_path) == [] and len(llm.requests) == 1


async def test_a_timeout_denies_and_says_so_on_the_card(tmp_path: Path, llm: FakeLLM) -> None:
    channel = AskingChannel()
    async with App(make_config(tmp_path, llm, "  approval_timeout: 0.3"), {"test": channel}):
        llm.script(Reply.tool_calls([WRITE]), Reply.text("It timed out."))
        await channel.inject(dm("save"))
        await channel.wait_for_replies(1)
        assert "No one approved write_file within 0.3 s" in tool_results(llm, 1)[0]
        await channel.wait(lambda: channel.questions[0].closed is not None)
        assert "not approved in time" in (channel.questions[0].closed or "")
        assert written(tmp_path) == []


async def test_only_the_call_that_needs_approval_waits(tmp_path: Path) -> None:
    """The registry runs a step's calls concurrently; the gate holds the one it asks about."""
    release = asyncio.Event()

    class HoldWrites:
        async def permit(self, ctx: ToolContext, tool: Tool, call_id: str, arguments: Mapping[str, Any]) -> str | None:
            if tool.name == "write_file":
                await release.wait()
            return None

    (tmp_path / "ws").mkdir()
    ctx = ToolContext(tmp_path / "ws", Conversation.of_key("agent:main:test:dm:u1"), "r1", "main", "u1",
                      gate=HoldWrites())
    done: dict[str, ToolResult] = {}
    calls = [ToolCall("w", "write_file", json.dumps({"path": "a.txt", "content": "x"})),
             ToolCall("l", "list_files", json.dumps({"path": "."}))]
    step = asyncio.create_task(builtin_registry().execute(calls, ctx, done=done))
    for _ in range(100):
        if "l" in done:
            break
        await asyncio.sleep(0.01)
    assert list(done) == ["l"]  # finished while write_file waits
    release.set()
    results = await step
    assert [r.is_error for r in results] == [False, False] and (tmp_path / "ws" / "a.txt").read_text() == "x"


async def test_a_text_while_a_card_waits_is_queued_and_reminded_once(running: tuple[App, AskingChannel],
                                                                    llm: FakeLLM) -> None:
    _, channel = running
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."), Reply.text("Later answer."))
    await channel.inject(dm("save"))
    question = await channel.question()
    await channel.inject(dm("hello?"))
    await channel.inject(dm("anyone?"))
    await channel.wait_for_replies(1)
    reminders = [t for t in channel.texts() if "waits for your answer" in t]
    parsed = parse_choice(question.choices[0].id)
    assert parsed is not None and len(reminders) == 1 and f"/approve {parsed[0]}" in reminders[0]
    await channel.press(question, "Allow once")
    await channel.wait_for_replies(3)
    assert channel.texts()[1:] == ["Saved.", "Later answer."]  # the texts ran after, as one batch


async def test_a_restart_while_a_card_waits_expires_it_and_answers_once(tmp_path: Path, llm: FakeLLM) -> None:
    config = make_config(tmp_path, llm)
    first = AskingChannel()
    async with App(config, {"test": first}):
        llm.script(Reply.tool_calls([WRITE]))
        await first.inject(dm("save", message_id="m-restart"))
        question = await first.question()
    second = AskingChannel()
    llm.script(Reply.text("Answered after the restart."))
    async with App(config, {"test": second}):
        await second.wait(lambda: question.id in second.closes)
        assert "expired" in second.closes[question.id]  # the card a dead run left is closed by the next process
        await second.wait_for_replies(1)
        await asyncio.sleep(0.2)
        assert second.texts() == ["Answered after the restart."]  # the message, answered once
    assert first.texts() == []


async def test_without_buttons_the_card_is_text_and_approve_answers_it(tmp_path: Path, llm: FakeLLM) -> None:
    channel = RecordingChannel()
    async with App(make_config(tmp_path, llm), {"test": channel}):
        llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
        await channel.inject(dm("save"))
        await channel.wait_for_replies(1)
        card = channel.texts()[0]
        approval_id = card.split("/deny ")[1].rstrip(".").strip()
        assert "Approval needed" in card and f"/approve {approval_id}" in card
        await channel.inject(dm(f"/approve {approval_id}"))
        await channel.wait_for_replies(3)
        assert set(channel.texts()[1:]) == {"Approved.", "Saved."}
        assert written(tmp_path) == ["hello"]
        assert any("allowed once" in text for _, text in channel.edits)


async def test_status_shows_a_waiting_approval(running: tuple[App, AskingChannel], llm: FakeLLM) -> None:
    app, channel = running
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved."))
    await channel.inject(dm("save"))
    question = await channel.question()
    await channel.inject(dm("/status"))
    await channel.wait_for_replies(1)
    assert "Waiting for approval: write_file" in channel.texts()[0]
    panel = app.capabilities["approvals"]  # what the dashboard's Operations page lists, found by its Protocol
    assert isinstance(panel, ApprovalSource)
    assert [(a.tool, a.requester) for a in await panel.pending_approvals()] == [("write_file", "test:u1")]
    await channel.press(question, "Deny")
    await channel.wait_for_replies(2)
    assert await panel.pending_approvals() == []


async def test_a_pre_tool_hook_refuses_with_its_first_line(tmp_path: Path, llm: FakeLLM) -> None:
    hooks = """hooks:
  pre_tool:
    - tools: [list_*]
      run: 'read call; case "$call" in *secret*) echo "no peeking at secrets"; exit 1;; esac; exit 0'
"""
    channel = AskingChannel()
    async with App(make_config(tmp_path, llm, hooks), {"test": channel}):
        llm.script(Reply.tool_calls([Call("list_files", {"path": "secret"}, id="l1")]), Reply.text("Refused."),
                   Reply.tool_calls([Call("list_files", {"path": "."}, id="l2")]), Reply.text("Listed."))
        await channel.inject(dm("peek"))
        await channel.wait_for_replies(1)
        assert tool_results(llm, 1) == ["list_files was refused by a pre-tool hook: no peeking at secrets"]
        await channel.inject(dm("list"))
        await channel.wait_for_replies(2)
        assert "refused" not in tool_results(llm, 3)[-1]


async def test_pre_tool_hooks_without_a_working_sandbox_stop_the_start(tmp_path: Path, llm: FakeLLM,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """exec is off, so nothing else checked bubblewrap: without it the start stops, naming the
    key, instead of every tool call being refused later."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bwrap on it
    config = make_config(tmp_path, llm, "hooks:\n  pre_tool:\n    - {run: 'exit 0'}\n")
    assert not config.tools.exec.enabled
    with pytest.raises(ConfigError, match=r"^hooks\.pre_tool: bwrap \(bubblewrap\) is not installed"):
        async with App(config, {"test": AskingChannel()}):
            pass


def test_rules_bind_owners_only_when_written() -> None:
    rules = ApprovalRules((("write_*", "ask"), ("exec", "never")))
    assert rules.needs("write_file", is_owner=True)
    assert not rules.needs("exec", is_owner=False)  # written: never, for everyone
    defaults = ApprovalRules()
    assert defaults.needs("exec", is_owner=False) and not defaults.needs("exec", is_owner=True)
    assert defaults.needs("mcp__files__delete", is_owner=False) and not defaults.needs("read_file", is_owner=False)
    assert defaults.needs("mcp__x__y", is_owner=True, declared="ask")  # a server's own setting binds owners


def test_the_card_masks_secrets_and_shortens_arguments() -> None:
    text = describe_call("exec", {"command": "curl -H 'Authorization: sk-abc' " + "x" * 400},
                         lambda t: t.replace("sk-abc", "[redacted]"))
    assert "sk-abc" not in text and "[redacted]" in text and "characters)" in text
    assert call_shape("exec", {"b": 1, "a": "x"}) == call_shape("exec", {"a": "x", "b": 1})
    assert parse_choice("ap:abcdef1234:o") is not None and parse_choice("ap:../x:o") is None
    assert len(json.dumps("ap:abcdef1234:s").encode()) <= 64
