"""The Conversation (issue 20): one frozen noun for who a turn is for and where, built once.

A linked person (``dm_scope: linked``) has one session and one workspace on every platform;
a sub-agent works in its parent's workspace; the workspace follows from the session key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App
from bot.conversation import ChannelInfo, Conversation, conversation_for, workspace_name
from bot.messages import ChatType, InboundMessage, Sender
from bot.session_keys import SessionKey
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.test_gateway_runs import config

OPEN = "channels: {telegram: {dm_policy: open}, discord: {dm_policy: open}}"


@pytest.fixture
async def both(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[App, RecordingChannel, RecordingChannel]]:
    cfg = config(tmp_path, llm, OPEN)
    agent = cfg.agent.model_copy(update={"dm_scope": "linked",
                                         "identity_links": {"ann": ["telegram:42", "discord:9001"]}})
    cfg = cfg.model_copy(update={"agent": agent})
    telegram, discord = RecordingChannel("telegram"), RecordingChannel("discord")
    app = App(cfg, {"telegram": telegram, "discord": discord})
    await app.__aenter__()
    try:
        yield app, telegram, discord
    finally:
        await app.__aexit__(None, None, None)


def tool_results(llm: FakeLLM, index: int) -> list[str]:
    return [m["content"] for m in llm.requests[index].body["messages"] if m.get("role") == "tool"]


async def test_a_linked_person_has_one_workspace_on_every_platform(both, llm: FakeLLM, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, telegram, discord = both
    llm.script(Reply.tool_calls([Call("write_file", {"path": "plan.md", "content": "ship on friday"})]),
               Reply.text("saved"),
               Reply.tool_calls([Call("read_file", {"path": "plan.md"})]),
               Reply.text("it says ship on friday"))
    await telegram.inject(dm("save my plan", "42", platform="telegram"))
    await telegram.wait_for_replies(1)
    await discord.inject(dm("what was my plan?", "9001", platform="discord"))
    await discord.wait_for_replies(1)
    assert (tmp_path / "workspaces" / "ann" / "plan.md").read_text() == "ship on friday"
    assert "ship on friday" in tool_results(llm, 3)[-1]
    assert not (tmp_path / "workspaces" / "telegram-42").exists()


async def test_a_sub_agent_reads_its_parents_files_in_a_linked_dm(both, llm: FakeLLM, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, telegram, _ = both
    (tmp_path / "workspaces" / "ann").mkdir(parents=True)
    (tmp_path / "workspaces" / "ann" / "notes.md").write_text("the code word is pelican")
    llm.script(Reply.tool_calls([Call("spawn", {"task": "read notes.md and tell me the code word"})]),
               Reply.tool_calls([Call("read_file", {"path": "notes.md"})]),  # the child
               Reply.text("pelican"),  # the child's answer
               Reply.text("The code word is pelican."))
    await telegram.inject(dm("ask a helper for the code word", "42", platform="telegram"))
    await telegram.wait_for_replies(1)
    assert "the code word is pelican" in tool_results(llm, 2)[-1]
    assert telegram.texts() == ["The code word is pelican."]


def test_the_workspace_follows_from_the_key() -> None:
    assert workspace_name(SessionKey("main", ChatType.DM, "42", "telegram")) == "telegram-42"
    assert workspace_name(SessionKey("main", ChatType.DM, "42", "telegram", thread="t1")) == "telegram-42"
    assert workspace_name(SessionKey("main", ChatType.DM, "ann")) == "ann"
    assert workspace_name(SessionKey("main", ChatType.GROUP, "-1", "telegram", thread="7")) == "telegram-group--1"
    assert workspace_name(SessionKey("main", ChatType.GROUP, "-1", "telegram", member="7")) == \
        "telegram-group--1-user-7"
    assert workspace_name(SessionKey("main", ChatType.DM, "ann", subs=(1,))) == "ann"


def test_a_conversation_is_built_once_and_its_sub_keeps_the_workspace() -> None:
    msg = InboundMessage("discord", "bot", "D1", ChatType.DM, Sender("9001", "Ann"), "hi", "m1")
    conv = conversation_for(msg, "main", dm_scope="linked", identity_links={"ann": ["discord:9001"]},
                            channel=ChannelInfo("discord", "Discord", "Markdown"))
    assert conv.session_key == "agent:main:dm:ann" and conv.person == "ann" and conv.workspace == "ann"
    assert (conv.platform, conv.chat_id, conv.chat_type) == ("discord", "D1", ChatType.DM)
    child = conv.sub(2)
    assert child.session_key == "agent:main:dm:ann:sub:2" and child.workspace == conv.workspace
    assert child.channel == conv.channel and hash(child) != hash(conv)
    group = conversation_for(InboundMessage("slack", "bot", "C1", ChatType.GROUP, Sender("U1"), "hi", "m2",
                                            thread_id="t9"), "main", identity_links={"ann": ["slack:U1"]})
    assert group.person == "ann" and group.workspace == "slack-group-C1"  # groups belong to the chat
    assert Conversation.of_key("agent:main:telegram:dm:42").workspace == "telegram-42"
