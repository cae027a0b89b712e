"""send_file on every platform, end to end: the model writes a file in its workspace and sends
it; the real SDKs against the fake platforms carry it. Refused outside the workspace, above the
platform's size limit, and when the file changed before it was sent (reported to the model)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.slack.channel import SlackChannel
from adapters.slack.dialect import SLACK
from adapters.telegram.channel import TelegramChannel
from bot.app import App
from bot.settings import load_config
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.test_discord_e2e import USER, Bot, bot  # noqa: F401 - the Discord process and its fixture

DM = 42
CSV = "name,amount\nAda,12\nLin,7\n"


def config_text(tmp_path: Path, llm: FakeLLM, channels: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}"}}}}
storage: {{path: "{tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
channels:
  console: {{enabled: false}}
{channels}
""")
    return path


def write_and_send(path: str = "out/report.csv", content: str = CSV, caption: str = "The **numbers**") -> list[Reply]:
    return [Reply.tool_calls([Call("write_file", {"path": path, "content": content})]),
            Reply.tool_calls([Call("send_file", {"path": path, "caption": caption})]),
            Reply.text("Here it is.")]


def tool_results(llm: FakeLLM, index: int = -1) -> list[str]:
    return [m["content"] for m in llm.requests[index].body["messages"] if m.get("role") == "tool"]


@pytest.fixture
async def telegram(tmp_path: Path) -> AsyncIterator[tuple[App, FakeTelegram, FakeLLM]]:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        path = config_text(tmp_path, llm, f"""  telegram: {{enabled: true, token: "{tg.token}", base_url: "{tg.api_root}",
              dm_policy: open}}""")
        config = load_config(path, env={})
        app = App(config, {"telegram": TelegramChannel(config.channels.telegram)})  # type: ignore[arg-type]
        await app.__aenter__()
        try:
            yield app, tg, llm
        finally:
            await app.__aexit__(None, None, None)


async def test_send_file_on_telegram(telegram: tuple[App, FakeTelegram, FakeLLM]) -> None:
    _, tg, llm = telegram
    llm.script(*write_and_send())
    tg.push(tg.message(DM, "make me a CSV of that", user_id=DM))
    await tg.wait_for(lambda: len(tg.sent) >= 2, timeout=10)
    (doc,) = tg.documents
    assert (doc.method, doc.filename, doc.data) == ("sendDocument", "report.csv", CSV.encode())
    assert doc.caption == "The <b>numbers</b>"  # rendered in the platform's dialect
    assert [s.plain for s in tg.sent][1] == "Here it is."  # after the file, which the tool waited for
    assert tool_results(llm)[-1] == "sent out/report.csv (25 B) to the chat"


async def test_send_file_refuses_outside_the_workspace_and_above_the_size_limit(
        telegram: tuple[App, FakeTelegram, FakeLLM], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app, tg, llm = telegram
    channel = app.channels["telegram"]
    monkeypatch.setattr(channel, "shape", replace(channel.shape, max_upload=1000))
    secret = tmp_path / "secret.txt"
    secret.write_text("the bot's own hidden words")
    workspace = tmp_path / "workspaces" / f"telegram-{DM}"
    llm.script(Reply.tool_calls([Call("write_file", {"path": "big.txt", "content": "x" * 2000}),
                                 Call("write_file", {"path": "small.txt", "content": "ok"})]),
               Reply.tool_calls([Call("send_file", {"path": "../secret.txt"}),
                                 Call("send_file", {"path": str(secret)}),
                                 Call("send_file", {"path": "link.txt"}),
                                 Call("send_file", {"path": "big.txt"})]),
               Reply.text("done"))
    workspace.mkdir(parents=True)
    os.symlink(secret, workspace / "link.txt")
    tg.push(tg.message(DM, "send me things", user_id=DM))
    await tg.wait_for(lambda: tg.sent, timeout=10)
    outside, absolute, link, big = tool_results(llm)[-4:]
    assert "outside the workspace" in outside and "outside the workspace" in absolute
    assert "outside the workspace" in link  # a link out is never followed
    assert big == "big.txt is 2.0 KB; Telegram takes files up to 1000 B"
    assert tg.documents == [] and "hidden words" not in json.dumps(llm.requests[-1].body)


async def test_a_file_changed_before_it_was_sent_is_reported_to_the_model_not_sent(
        telegram: tuple[App, FakeTelegram, FakeLLM], tmp_path: Path) -> None:
    app, tg, llm = telegram
    workspace = tmp_path / "workspaces" / f"telegram-{DM}"
    llm.script(Reply.tool_calls([Call("write_file", {"path": "r.csv", "content": CSV})]),
               Reply.tool_calls([Call("message", {"text": "working on it"}), Call("send_file", {"path": "r.csv"})]),
               Reply.text("sorry"))
    tg.hold("sendMessage")  # the progress message holds the chat's queue: the file waits behind it
    tg.push(tg.message(DM, "the csv please", user_id=DM))
    await tg.wait_for_calls("sendMessage", 1, timeout=10)
    async with asyncio.timeout(10):
        while not [a for a in await app.store.undelivered() if a.id.startswith("file-")]:
            await asyncio.sleep(0.02)
    (workspace / "r.csv").write_text(CSV + "Bo,1\n")  # changed after send_file read it
    tg.release("sendMessage")
    await tg.wait_for(lambda: any(s.plain == "sorry" for s in tg.sent), timeout=10)
    assert tg.documents == []
    assert tool_results(llm)[-1] == "r.csv was not sent: r.csv changed before it was sent"


async def test_send_file_on_slack(tmp_path: Path) -> None:
    async with FakeLLM() as llm, FakeSlack() as slack:
        path = config_text(tmp_path, llm, f"""  slack: {{enabled: true, mode: socket, bot_token: "{slack.bot_token}", app_token: "{slack.app_token}",
           signing_secret: "{slack.signing_secret}", base_url: "{slack.base_url}", dm_policy: open}}""")
        config = load_config(path, env={})
        app = App(config, {"slack": SlackChannel(config.channels.slack, SLACK)})  # type: ignore[attr-defined]
        await app.__aenter__()
        try:
            llm.script(*write_and_send())
            await slack.wait_for_ack(await slack.push(slack.event(slack.message("D1", "make me a CSV"))))
            await slack.wait_for(lambda: any(p.text == "Here it is." for p in slack.posts), what="the answer")
            (upload,) = [u for u in slack.uploads.values() if u["data"] is not None]
            assert (upload["name"], upload["data"], upload["channel"]) == ("report.csv", CSV.encode(), "D1")
            assert upload["comment"].replace("\u200b", "") == "The *numbers*"  # Slack mrkdwn
            assert tool_results(llm)[-1] == "sent out/report.csv (25 B) to the chat"
        finally:
            await app.__aexit__(None, None, None)


@pytest.mark.timeout(60)
async def test_send_file_on_discord(bot: Bot) -> None:  # noqa: F811
    dc, llm = bot.dc, bot.llm
    await bot.start()
    llm.script(*write_and_send())
    dc.dm(USER, "make me a CSV")
    await dc.wait_for_sent(2, timeout=15)
    file_message, answer = dc.sent[:2]
    assert file_message.files == (("report.csv", CSV.encode()),) and file_message.content == "The **numbers**"
    assert answer.content == "Here it is."
    assert tool_results(llm)[-1] == "sent out/report.csv (25 B) to the chat"
