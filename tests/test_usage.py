"""Cost in sight (issue 34 item 7) through the fake Telegram and the real SDK: the usage footer,
``/usage``, the owners' alert once a day (remembered in the database, across a restart), and
every model call counted: a silent (NO_REPLY) turn's, a title's, a sub-agent's, a scheduled
task's and a compaction's too, each charged to the person it worked for."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapters.telegram.channel import TelegramChannel
from bot.app import App
from bot.limits import LimitSettings
from bot.providers.base import Usage
from bot.settings import load_config
from bot.usage.report import Spent, footer, passed, usage_text
from tests.fakes.llm_server import Call, FakeLLM, Reply, Tokens
from tests.fakes.telegram_server import FakeTelegram

USER, OWNER = 42, 7
PRICE = "pricing: {fake-model: {input: 10.0, output: 20.0}}"  # USD per million tokens


class Bot:
    def __init__(self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
        self.tmp_path, self.llm, self.tg = tmp_path, llm, tg
        self.app: App | None = None

    async def start(self, extra: str = "") -> None:
        path = self.tmp_path / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model, usage_footer: cost}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}"}}}}
storage: {{path: "{self.tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp_path / 'workspaces'}"}}
{PRICE}
channels:
  console: {{enabled: false}}
  telegram: {{enabled: true, token: "{self.tg.token}", base_url: "{self.tg.api_root}", dm_policy: open,
              owners: ["{OWNER}"]}}
{extra}
""")
        config = load_config(path, env={})
        self.app = App(config, {"telegram": TelegramChannel(config.channels.telegram)})  # type: ignore[arg-type]
        await self.app.__aenter__()

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.__aexit__(None, None, None)
            self.app = None

    def charged(self, person: str) -> list[tuple[str, int]]:
        with sqlite3.connect(self.tmp_path / "chatgate.db") as db:
            return [(str(r[0]), int(r[1])) for r in
                    db.execute("SELECT run_id, tokens FROM charges WHERE person = ? ORDER BY id", (person,))]

    def sent_to(self, chat: int) -> list[str]:
        return [s.plain or "" for s in self.tg.sent if str(s.chat_id) == str(chat)]


async def until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll ``predicate`` (the database, what the fake was sent) until it holds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        b = Bot(tmp_path, llm, tg)
        try:
            yield b
        finally:
            await b.stop()


async def test_the_footer_says_what_the_answer_used(bot: Bot) -> None:
    await bot.start()
    bot.llm.script(Reply.text("Paris.", usage=Tokens(input=1000, output=500)))
    bot.tg.push(bot.tg.message(USER, "capital of France?", user_id=USER))
    [sent] = await bot.tg.wait_for_sent(1, timeout=10)
    assert sent.plain == "Paris.\n\n1,500 tokens (1,000 in, 500 out) · $0.0200"
    assert "<i>1,500 tokens" in (sent.text or "")  # a quiet line: italic in Telegram's dialect


async def test_a_silent_turn_is_counted_and_usage_shows_it_against_the_limits(bot: Bot) -> None:
    await bot.start("limits: {daily_tokens: 10000, daily_cost_usd: 1.0}")
    bot.llm.script(Reply.text("NO_REPLY", usage=Tokens(input=2000, output=10)))
    bot.tg.push(bot.tg.message(USER, "ok thanks", user_id=USER))
    await bot.llm.wait_for_requests(1, timeout=10)
    await until(lambda: bot.charged(f"telegram:{USER}"), timeout=10)
    assert sum(t for _, t in bot.charged(f"telegram:{USER}")) == 2010 and not bot.tg.sent  # charged, nothing said
    bot.tg.push(bot.tg.message(USER, "/usage", user_id=USER))
    [reply] = await bot.tg.wait_for_sent(1, timeout=10)
    assert reply.plain == ("Today (UTC): 2,010 tokens of 10,000 (20%), $0.0202 of $1.00 (2%)\n"
                           "Last 30 days: 2,010 tokens, $0.0202\nBudgets renew at 00:00 UTC.")
    bot.tg.push(bot.tg.message(OWNER, "/usage", user_id=OWNER))
    await bot.tg.wait_for_sent(2, timeout=10)
    assert bot.sent_to(OWNER)[-1].endswith("As an owner you have no daily budget.\n"
                                           "The whole bot today: 2,010 tokens, $0.0202")


async def test_a_title_call_is_charged_to_the_person_too(bot: Bot) -> None:
    await bot.start()
    bot.tg.push(bot.tg.message(USER, "hello", user_id=USER))
    await bot.tg.wait_for_sent(1, timeout=10)
    await until(lambda: len(bot.charged(f"telegram:{USER}")) == 2, timeout=10)
    runs = [run for run, _ in bot.charged(f"telegram:{USER}")]
    assert runs[1] == f"{runs[0]}-title" and len(bot.llm.title_requests) == 1


def spent(bot: Bot) -> int:
    return sum(t for _, t in bot.charged(f"telegram:{USER}"))


async def test_a_sub_agents_calls_are_charged_to_the_person(bot: Bot) -> None:
    await bot.start("models: {titles: null}")
    bot.llm.script(Reply.tool_calls([Call("spawn", {"task": "look it up"}, id="s0")], usage=Tokens(100, 10)),
                   Reply.text("found it", usage=Tokens(200, 20)),  # the sub-agent's call
                   Reply.text("Here it is.", usage=Tokens(300, 30)))
    bot.tg.push(bot.tg.message(USER, "find it for me", user_id=USER))
    await bot.tg.wait_for_sent(1, timeout=10)
    await until(lambda: spent(bot) == 660, timeout=10)
    assert len(bot.llm.requests) == 3


async def test_a_scheduled_tasks_calls_are_charged_to_its_creator(bot: Bot) -> None:
    await bot.start("models: {titles: null}")
    bot.llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "1s",
                                                       "text": "say the word"})], usage=Tokens(100, 10)),
                   Reply.text("Done: in a second.", usage=Tokens(200, 20)),
                   Reply.text("The word is tea.", usage=Tokens(400, 40)))  # the task's own turn, later
    bot.tg.push(bot.tg.message(USER, "in 1s: say the word", user_id=USER))
    await until(lambda: len(bot.sent_to(USER)) == 2, timeout=15)
    assert bot.sent_to(USER)[1].startswith("The word is tea.")
    await until(lambda: spent(bot) == 770, timeout=10)


async def test_a_compactions_calls_are_charged_to_the_person(bot: Bot) -> None:
    await bot.start("models: {titles: null}")
    bot.llm.script(*(Reply.text(word, usage=Tokens(10, 1)) for word in ("one", "two", "three")),
                   Reply.text("NO_REPLY", usage=Tokens(500, 5)),  # the memory flush before the summary
                   Reply.text("They said one, two and three.", usage=Tokens(600, 60)))  # the summary
    for n, text in enumerate(("first", "second", "third"), 1):
        bot.tg.push(bot.tg.message(USER, text, user_id=USER))
        await until(lambda n=n: len(bot.sent_to(USER)) == n, timeout=10)  # type: ignore[misc]
    bot.tg.push(bot.tg.message(USER, "/compact", user_id=USER))
    await until(lambda: len(bot.sent_to(USER)) == 4, timeout=10)
    assert bot.sent_to(USER)[3].startswith("Compacted")
    await until(lambda: spent(bot) == 33 + 505 + 660, timeout=10)


async def test_the_owners_are_told_once_a_day_even_across_a_restart(bot: Bot) -> None:
    limits = "limits: {daily_tokens: 1000, alert_at: 0.8, messages_per_minute: null}\nmodels: {titles: null}"
    await bot.start(limits)
    bot.llm.script(Reply.text("a", usage=Tokens(input=500, output=100)),
                   Reply.text("b", usage=Tokens(input=200, output=50)),
                   Reply.text("c", usage=Tokens(input=10, output=5)))
    bot.tg.push(bot.tg.message(USER, "one", user_id=USER))  # 600 of 1,000: below 80 %
    await until(lambda: bot.sent_to(USER), timeout=10)
    bot.tg.push(bot.tg.message(USER, "two", user_id=USER))  # 850: past it
    await until(lambda: bot.sent_to(OWNER), timeout=10)
    assert bot.sent_to(OWNER) == ["Usage alert: telegram:42 has used 850 of 1,000 tokens (85%) of today's "
                                  "budget (UTC)."]
    await bot.stop()
    await bot.start(limits)  # another process: the database remembers the alert was given
    bot.tg.push(bot.tg.message(USER, "three", user_id=USER))
    await until(lambda: len(bot.sent_to(USER)) == 2, timeout=10)
    await asyncio.sleep(0.3)  # an alert would be owed by now: the run's charges were told before its answer
    assert len(bot.sent_to(OWNER)) == 1 and sum(t for _, t in bot.charged(f"telegram:{USER}")) == 865


async def test_the_whole_bots_budget_alerts_the_owners_once_then_refuses_new_runs(bot: Bot) -> None:
    other = 43
    limits = ("limits: {bot_daily_tokens: 1000, alert_at: 0.5, messages_per_minute: null}\n"
              "models: {titles: null}")
    await bot.start(limits)
    bot.llm.script(Reply.text("a", usage=Tokens(input=300, output=100)),
                   Reply.text("b", usage=Tokens(input=200, output=50)),
                   Reply.text("c", usage=Tokens(input=400, output=100)))
    bot.tg.push(bot.tg.message(USER, "one", user_id=USER))  # 400 of the bot's 1,000: below 50 %
    await until(lambda: bot.sent_to(USER), timeout=10)
    bot.tg.push(bot.tg.message(other, "two", user_id=other))  # 650: past it, whoever spent it
    await until(lambda: bot.sent_to(OWNER), timeout=10)
    assert bot.sent_to(OWNER) == ["Usage alert: the whole bot has used 650 of 1,000 tokens (65%) of its budget "
                                  "for today (UTC)."]
    bot.tg.push(bot.tg.message(USER, "three", user_id=USER))  # 1,150: spent
    await until(lambda: len(bot.sent_to(USER)) == 2, timeout=10)
    bot.tg.push(bot.tg.message(other, "four", user_id=other))  # refused, with one sentence
    await until(lambda: len(bot.sent_to(other)) == 2, timeout=10)
    refused = ("I've reached the whole bot's spending limit for today; I can take new requests again after "
               "00:00 UTC.")
    assert bot.sent_to(other)[1] == refused
    await bot.stop()
    await bot.start(limits)  # another process: still spent, the person already told, the owners too
    bot.tg.push(bot.tg.message(USER, "five", user_id=USER))  # refused: told once (this person's first time)
    await until(lambda: len(bot.sent_to(USER)) == 3, timeout=10)
    assert bot.sent_to(USER)[2] == refused
    bot.tg.push(bot.tg.message(other, "six", user_id=other))  # refused, silently: told already today
    bot.tg.push(bot.tg.message(OWNER, "/usage", user_id=OWNER))  # owners are exempt: they see the whole bot
    await until(lambda: len(bot.sent_to(OWNER)) == 2, timeout=10)
    assert "The whole bot today: 1,150 tokens of 1,000 (115%)" in bot.sent_to(OWNER)[1]
    assert len(bot.llm.requests) == 3 and len(bot.sent_to(other)) == 2
    assert sum(1 for text in bot.sent_to(OWNER) if text.startswith("Usage alert")) == 1


@pytest.mark.parametrize(("mode", "line"), [
    ("off", ""), ("tokens", "_1,234 tokens (1,000 in, 234 out)_"),
    ("cost", "_1,234 tokens (1,000 in, 234 out) · $0.0123_"),
])
def test_the_footer_line(mode: str, line: str) -> None:
    assert footer(mode, Usage(1000, 234), 0.0123) == line
    assert footer(mode, Usage(), 0.0) == ""


def test_usage_words_and_the_alert_threshold() -> None:
    none = LimitSettings(daily_tokens=None, daily_cost_usd=None)
    assert usage_text(Spent(5, 1.5), Spent(9, 2.0), none, exempt=False).splitlines() == [
        "Today (UTC): 5 tokens, $1.50", "Last 30 days: 9 tokens, $2.00", "There is no daily budget."]
    both = LimitSettings(daily_tokens=100, daily_cost_usd=1.0)
    assert passed(Spent(79, 0.1), both, 0.8) is None
    assert passed(Spent(80, 0.1), both, 0.8) == "tokens"
    assert passed(Spent(1, 0.85), both, 0.8) == "cost"
    assert passed(Spent(10**9, 10.0), none, 0.5) is None
    whole = LimitSettings(bot_daily_tokens=1000, bot_daily_cost_usd=None)
    assert passed(Spent(600, 0.0), whole, 0.5) is None  # a person's budgets: none
    assert passed(Spent(600, 0.0), whole, 0.5, bot=True) == "tokens"
