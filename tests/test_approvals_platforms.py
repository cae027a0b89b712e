"""Approvals through each platform's real SDK against its fake: the card, a press, the call.

The whole App runs with one real channel (the channel contract suite's harnesses): a group
member asks, the model calls a tool that needs approval, the card appears with its buttons
on the platform, the member presses, and the call runs (or not) exactly as the core says.
What the core decides is tested in test_approvals.py; here, that it holds on the wire.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from bot.channels import Choice
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.test_channel_contract import Harness, SlackHarness, harness  # noqa: F401 - the fixture

pytestmark = pytest.mark.parametrize("harness", ["telegram", "slack", "discord"], indirect=True)

WRITE = Call("write_file", {"path": "note.txt", "content": "hello"}, id="w1")


async def card(h: Harness, timeout: float = 10.0) -> tuple[str, str]:
    """(approval id, question id) of the card once the platform shows it."""
    async with asyncio.timeout(timeout):
        while True:
            with sqlite3.connect(f"file:{h.tmp / 'chatgate.db'}?mode=ro", uri=True) as db:
                rows = list(db.execute("SELECT id, question_id FROM approvals WHERE question_id IS NOT NULL"))
            if rows:
                return rows[-1]
            await asyncio.sleep(0.05)


async def until(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def written(h: Harness) -> list[str]:
    return [p.read_text() for p in (h.tmp / "workspaces").glob("*/note.txt")]


async def test_allow_once_on_the_platform_runs_the_call_and_closes_the_card(harness: Harness, llm: FakeLLM) -> None:
    h = harness
    h.extra_yaml = "tools: {approval: {write_file: ask}}"
    await h.start()
    llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved it."))
    await h.say_in_group("save hello", mention=True)
    approval, question = await card(h)
    assert h.buttons(question) == [f"ap:{approval}:o", f"ap:{approval}:s", f"ap:{approval}:d"]
    assert "write_file" in h.question_text(question)
    assert written(h) == []
    await h.press(question, Choice(f"ap:{approval}:o", "Allow once"))
    await until(lambda: written(h) == ["hello"])
    await until(lambda: any("Saved it." in t for t in h.shown_to_all()))
    await until(lambda: h.buttons(question) == [])
    assert "allowed once" in h.question_text(question)
    h.deadlines_met()


async def test_deny_on_the_platform_refuses_the_call(harness: Harness, llm: FakeLLM) -> None:
    h = harness
    h.extra_yaml = "tools: {approval: {write_file: ask}}"
    await h.start()
    llm.script(Reply.tool_calls([WRITE]), Reply.text("I did not save it."))
    await h.say_in_group("save hello", mention=True)
    approval, question = await card(h)
    await h.press(question, Choice(f"ap:{approval}:d", "Deny"))
    await until(lambda: any("I did not save it." in t for t in h.shown_to_all()))
    assert written(h) == []
    assert "The person denied write_file" in str(llm.requests[1].body["messages"])
    await until(lambda: h.buttons(question) == [])
    assert "denied" in h.question_text(question)
    h.deadlines_met()


async def test_stop_with_a_card_waiting_expires_the_card_on_the_platform(harness: Harness, llm: FakeLLM) -> None:
    h = harness
    h.extra_yaml = "tools: {approval: {write_file: ask}}"
    await h.start()
    llm.script(Reply.tool_calls([WRITE]))
    await h.say_in_group("save hello", mention=True)
    _, question = await card(h)
    if isinstance(h, SlackHarness):  # a slash command in the channel, as Slack sends one
        await h._push(h.slack.command("/stop", h.group, user=h.presser))
    else:
        await h.say_in_group("/stop", mention=True)
    await until(lambda: any(t.strip() == "Stopped." for t in h.shown_to_all()))
    await until(lambda: h.buttons(question) == [])
    assert "expired" in h.question_text(question) and written(h) == []
