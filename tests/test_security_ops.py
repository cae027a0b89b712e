"""Issue 32's operational edges, through the real stack.

Item 11: a job more than ten years away is refused wherever one is made (``/remind`` and the
``schedule`` tool, through the fake Telegram), and a stored row with a far or odd instant
breaks neither ``/tasks`` nor the dashboard's Operations page over HTTP."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from adapters.telegram.channel import TelegramChannel
from bot.app import App
from bot.errors import ConfigError
from bot.schedules import rules
from bot.schedules.jobs import RuleKind, When
from bot.settings import load_config
from tests.dashboard_bed import PASSWORDS, Client, users_yaml
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram

pytestmark = pytest.mark.timeout(60)

ADA = 42


@dataclass
class Bot:
    app: App
    tg: FakeTelegram
    llm: FakeLLM
    db: Path

    async def say(self, text: str) -> str:
        """Send ``text`` as Ada; the bot's next message to her."""
        before = len(self.tg.sent)
        self.tg.push(self.tg.message(ADA, text, user_id=ADA))
        await self.tg.wait_for(lambda: len(self.tg.sent) > before, timeout=10)
        return self.tg.sent[before].plain or ""

    def sql(self, statement: str, *args: object) -> list[tuple[object, ...]]:
        with sqlite3.connect(self.db, timeout=5) as db:
            return db.execute(statement, args).fetchall()


@pytest.fixture
async def bot(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Bot]:
    async with FakeTelegram() as tg:
        db = tmp_path / "chatgate.db"
        path = tmp_path / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{llm.openai_base_url}", max_retries: 0}}}}
storage: {{path: "{db}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
schedules: {{default_timezone: Europe/Berlin}}
channels:
  console: {{enabled: false}}
  telegram: {{enabled: true, token: "{tg.token}", base_url: "{tg.api_root}", dm_policy: open}}
dashboard:
  enabled: true
  bind: 127.0.0.1:0
  users:
{users_yaml()}
""")
        config = load_config(path, env={})
        app = App(config, {"telegram": TelegramChannel(config.channels.telegram)})  # type: ignore[arg-type]
        await app.__aenter__()
        try:
            yield Bot(app, tg, llm, db)
        finally:
            await app.__aexit__(None, None, None)


async def operations_page(b: Bot) -> tuple[int, str]:
    assert b.app.capabilities.get("dashboard") is not None
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                     timeout=aiohttp.ClientTimeout(total=10)) as session:
        client = Client(session, b.app.capabilities["dashboard"].url.rstrip("/"))
        assert (await client.login("vera", PASSWORDS["vera"])).status == 303
        response = await client.get("/operations")
        return response.status, await response.text()


async def test_a_reminder_past_ten_years_is_refused_by_remind_and_by_the_tool(bot: Bot) -> None:
    refused = await bot.say("/remind in 100000000w tea")
    assert refused.startswith("That is more than 10 years from now"), refused
    assert "Usage: /remind" in refused
    assert (await bot.say("/remind in 522w tea")).startswith("That is more than 10 years from now")
    assert (await bot.say("/remind in 521w tea")).startswith("I'll remind you ")  # just within the horizon
    bot.llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "text": "tea", "after": "100000000w"})]),
                   Reply.tool_calls([Call("schedule", {"action": "create", "text": "tea", "at": "9999-12-31T23:00"})]),
                   Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "text": "tea",
                                                       "every": "100000000w", "start": "2030-01-01T09:00"})]),
                   Reply.text("ok"))
    assert await bot.say("remind me of tea in a long time") == "ok"
    results = [m["content"] for m in bot.llm.requests[-1].body["messages"] if m.get("role") == "tool"]
    assert len(results) == 3 and all("more than 10 years" in r for r in results), results
    assert bot.sql("SELECT count(*) FROM jobs") == [(1,)]  # only the one within the horizon


async def test_a_stored_far_or_odd_instant_breaks_neither_tasks_nor_the_operations_page(bot: Bot) -> None:
    for text in ("far away", "long ago", "the last second", "on mars"):
        assert (await bot.say(f"/remind in 1h {text}")).startswith("I'll remind you ")
    bot.sql("UPDATE jobs SET anchor = ?, next_at = ? WHERE text = 'far away'", 60480001700000000, 60480001700000000)
    bot.sql("UPDATE jobs SET anchor = ?, next_at = ? WHERE text = 'long ago'", -10**15, -10**15)
    bot.sql("UPDATE jobs SET anchor = ?, next_at = ? WHERE text = 'the last second'", 2**63 - 1, 2**63 - 1)
    bot.sql("UPDATE jobs SET zone = 'Mars/Base' WHERE text = 'on mars'")
    listed = await bot.say("/tasks")
    assert listed.startswith("Your jobs here (times in Europe/Berlin):"), listed
    assert all(text in listed for text in ("far away", "long ago", "the last second", "on mars")), listed
    assert "next instant 60480001700000000 (outside the calendar)" in listed
    status, page = await operations_page(bot)
    assert status == 200, page
    assert all(text in page for text in ("far away", "long ago", "the last second", "on mars"))
    assert "instant 60480001700000000 (outside the calendar)" in page


NOW = 1_750_000_000


@pytest.mark.parametrize(("when", "refused"), [
    (When(RuleKind.AT, "UTC", NOW + rules.HORIZON), None),
    (When(RuleKind.AT, "UTC", NOW + rules.HORIZON + 1), "more than 10 years from now"),
    (When(RuleKind.EVERY, "UTC", NOW + 60, rules.HORIZON), None),
    (When(RuleKind.EVERY, "UTC", NOW + 60, rules.HORIZON + rules.DAY), "more than 10 years between runs"),
    (When(RuleKind.EVERY, "Europe/Berlin", NOW - rules.DAY, 10**8 * 7 * rules.DAY), "between runs"),
    (When(RuleKind.EVERY, "UTC", NOW + rules.HORIZON + 1, 3600), "more than 10 years from now"),
    (When(RuleKind.CRON, "UTC", NOW, cron="0 9 29 2 *"), None),  # every leap day: within the horizon
])
def test_first_run_refuses_what_lies_past_the_horizon(when: When, refused: str | None) -> None:
    if refused is None:
        first = rules.first_run(when, NOW)
        assert first is not None and NOW < first <= NOW + rules.HORIZON
    else:
        with pytest.raises(ValueError, match=refused):
            rules.first_run(when, NOW)


@pytest.mark.parametrize("t", [60480001700000000, -10**15, 2**63 - 1, 253402300800])
def test_showing_an_instant_never_fails(t: int) -> None:
    assert rules.local(t, rules.zone("Europe/Berlin")) == f"instant {t} (outside the calendar)"
    assert rules.local(t, rules.shown_zone("Mars/Base"), "%Y-%m-%d") == f"instant {t} (outside the calendar)"


def test_a_shared_skill_folder_that_links_into_a_workspace_is_refused(tmp_path: Path) -> None:
    """Shared skills stay out of reach of writes: a ``skills.paths`` entry that is a link into a
    person's workspace (where their file tools and sandboxed commands write) is refused."""
    workspace = tmp_path / "workspaces" / "telegram-42" / "skills"
    workspace.mkdir(parents=True)
    (tmp_path / "shared-skills").symlink_to(workspace)
    path = tmp_path / "config.yaml"
    path.write_text(f"""
providers: {{openai: {{api_key: test-key}}}}
storage: {{path: "{tmp_path / 'data' / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
skills: {{paths: ["{tmp_path / 'shared-skills'}"]}}
""")
    with pytest.raises(ConfigError, match=r"skills.paths\[0\]: .* is inside workspace.root"):
        load_config(path, env={})
