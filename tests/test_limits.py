"""Limits per person (rate, daily tokens and cost; owners exempt) and per-member group sessions,
through the whole App against the fake LLM; the bucket and the day as pure logic."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import App
from bot.limits import Bill, LimitSettings, PersonLimits, limit_keys, split
from bot.messages import ChatType, InboundMessage, Sender
from bot.providers.base import Usage
from bot.store.base import Charge
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import Call, FakeLLM, Reply, Tokens
from tests.test_gateway_runs import config, group_msg, tg_dm

OPEN = "channels: {telegram: {dm_policy: open, group_policy: open}}"


@pytest.fixture
async def start(tmp_path: Path, llm: FakeLLM) -> AsyncIterator:  # type: ignore[type-arg]
    apps: list[App] = []

    async def started(extra: str, *, group_scope: str = "per-group") -> tuple[App, RecordingChannel]:
        channel = RecordingChannel("telegram")
        # the budgets here count the runs' own calls; a session's title (charged too) is test_models_switch's
        cfg = config(tmp_path, llm, extra + "\nmodels: {titles: null}")
        cfg = cfg.model_copy(update={"workspace": cfg.workspace.model_copy(update={"group_scope": group_scope})})
        app = App(cfg, {"telegram": channel})
        await app.__aenter__()
        apps.append(app)
        return app, channel

    yield started
    for app in reversed(apps):
        await app.__aexit__(None, None, None)


async def test_over_the_rate_one_notice_no_model_request_nothing_lost(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    app, channel = await start(OPEN + "\nlimits: {messages_per_minute: 3}\nruns: {queue_mode: followup, debounce_ms: 0}")
    for i in range(3):
        await channel.inject(tg_dm(f"m{i}"))
        await channel.wait_for_replies(i + 1)
    await channel.inject(tg_dm("the fourth"))
    await channel.inject(tg_dm("the fifth"))
    await channel.wait_for_replies(4)
    await asyncio.sleep(0.3)
    assert len(llm.requests) == 3
    assert channel.texts()[3].startswith("You're sending messages faster than I can take them")
    assert len(channel.sent) == 4  # the fifth is answered quietly: one sentence per flood
    assert await app.store.unanswered() == []  # both stored and answered


async def test_over_the_daily_token_budget(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    app, channel = await start(OPEN + "\nlimits: {daily_tokens: 5}")
    await channel.inject(tg_dm("first"))
    await channel.wait_for_replies(1)
    await channel.inject(tg_dm("second"))
    await channel.wait_for_replies(2)
    assert len(llm.requests) == 1
    assert channel.texts()[1] == "You've used today's allowance of 5 tokens; it renews at 00:00 UTC."
    await channel.inject(tg_dm("/status"))
    await channel.wait_for_replies(3)
    assert "Today (UTC):" in channel.texts()[2] and "of 5" in channel.texts()[2]


async def test_the_budget_counts_what_was_stored_before_a_restart(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    app, channel = await start(OPEN + "\nlimits: {daily_cost_usd: 0.000001}\npricing: {fake-model: {input: 100, output: 100}}")
    await channel.inject(tg_dm("first"))
    await channel.wait_for_replies(1)
    await app.__aexit__(None, None, None)
    _, again = await start(OPEN + "\nlimits: {daily_cost_usd: 0.000001}\npricing: {fake-model: {input: 100, output: 100}}")
    await again.inject(tg_dm("after the restart"))
    await again.wait_for_replies(1)
    assert again.texts() == ["You've used today's budget of $0.00; it renews at 00:00 UTC."]
    assert len(llm.requests) == 1


async def test_owners_are_exempt(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    _, channel = await start("channels: {telegram: {dm_policy: open, owners: ['42']}}\n"
                             "limits: {messages_per_minute: 1, daily_tokens: 1}\nruns: {queue_mode: followup, debounce_ms: 0}")
    for i in range(3):
        await channel.inject(tg_dm(f"m{i}"))
        await channel.wait_for_replies(i + 1)
    assert len(llm.requests) == 3 and all(t.startswith("echo:") for t in channel.texts())


async def test_members_of_a_per_user_group_never_share_a_session(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    _, channel = await start(OPEN, group_scope="per-user")
    llm.script(Reply.hang())
    await channel.inject(group_msg("alice's secret plan", user="alice"))
    await llm.wait_for_requests(1)
    await channel.inject(group_msg("what did alice ask?", user="bob"))  # not collected behind alice's run
    await llm.wait_for_requests(2)
    bob = json.dumps(llm.requests[1].body["messages"])
    assert "what did alice ask?" in bob and "secret plan" not in bob


# -- the bucket and the day, as pure logic ----------------------------------------------


class NoUsage:
    def __init__(self) -> None:
        self.reads = 0

    async def usage_since(self, person: str, since: float) -> tuple[int, float]:
        self.reads += 1
        return 0, 0.0

    async def bot_usage_since(self, since: float) -> tuple[int, float]:
        return 0, 0.0


async def test_the_bucket_refills_over_a_minute_and_tells_once_per_window() -> None:
    now = [1_700_000_000.0]
    limits = PersonLimits(LimitSettings(messages_per_minute=2), NoUsage(), clock=lambda: now[0])
    assert await limits.check("t:1") is None and await limits.check("t:1") is None
    first = await limits.check("t:1")
    assert first is not None and first.text and first.reason == "rate"
    second = await limits.check("t:1")
    assert second is not None and second.text == ""  # told once
    assert await limits.check("t:2") is None  # another person has their own bucket
    now[0] += 30  # half a minute: one message's worth
    assert await limits.check("t:1") is None


async def test_the_day_is_read_once_and_renews_at_midnight_utc() -> None:
    store = NoUsage()
    now = [86400.0 * 20000 + 3600]  # 01:00 UTC
    limits = PersonLimits(LimitSettings(messages_per_minute=None, daily_tokens=100), store, clock=lambda: now[0])
    assert await limits.check("t:1") is None
    limits.charge([Charge("t:1", 100, 0.0)])
    refused = await limits.check("t:1")
    assert refused is not None and refused.reason == "tokens"
    assert store.reads == 1  # the store is asked once a day, then the counts are kept
    now[0] += 86400  # the next day
    assert await limits.check("t:1") is None and store.reads == 2


def as_sender(sender: Sender, chat: str = "-100", platform: str = "telegram") -> InboundMessage:
    return InboundMessage(platform, "bot", chat, ChatType.GROUP, sender, "hi", "m1")


@pytest.mark.parametrize(("msg", "keys"), [
    (as_sender(Sender("42")), ("telegram:42",)),
    (as_sender(Sender("-1005", as_channel=True)), ("telegram:as-channel:-100", "telegram:-1005")),
    (as_sender(Sender("-1005", as_channel=True), chat="-200"), ("telegram:as-channel:-200", "telegram:-1005")),
    (as_sender(Sender("U1"), platform="slack"), ("slack:U1",)),
])  # fmt: skip
def test_limit_keys(msg: InboundMessage, keys: tuple[str, ...]) -> None:
    assert limit_keys(msg) == keys


async def test_channels_share_one_bucket_per_chat_and_a_refusal_there_charges_no_channel() -> None:
    limits = PersonLimits(LimitSettings(messages_per_minute=3), NoUsage(), clock=lambda: 1_700_000_000.0)
    channels = [as_sender(Sender(f"-100{n}", as_channel=True)) for n in range(5)]
    results = [await limits.check_all(limit_keys(m)) for m in channels]
    assert [r is None for r in results] == [True, True, True, False, False]
    assert results[3] is not None and results[3].text and results[4] is not None and results[4].text == ""
    assert await limits.check_all(limit_keys(as_sender(Sender("-1000", as_channel=True), chat="-200"))) is None
    own = [await limits.check("telegram:-1004") for _ in range(3)]  # refused at the shared bucket: its own is full
    assert own == [None, None, None]
    assert await limits.check_all(limit_keys(as_sender(Sender("42")))) is None  # people in the chat are apart


async def test_the_message_tool_counts_against_the_rate(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    from tests.fakes.llm_server import Call

    _, channel = await start(OPEN + "\nlimits: {messages_per_minute: 2}")
    llm.script(Reply.tool_calls([Call("message", {"text": "first progress"}, id="c1")]),
               Reply.tool_calls([Call("message", {"text": "second progress"}, id="c2")]),
               Reply.text("done"))
    await channel.inject(tg_dm("work on it"))  # the message itself takes one of the two
    await channel.wait_for_replies(2)
    await asyncio.sleep(0.3)
    assert channel.texts() == ["first progress", "done"]  # the second extra message was over the rate
    assert "limit" in json.dumps(llm.requests[2].body["messages"][-1])


# -- charging (issue 19, item 3): every model call, as it arrives, whatever way the run ends, once

def test_a_bill_splits_each_call_evenly_and_tells_the_meter_at_once() -> None:
    told: list[Charge] = []
    bill = Bill(["t:1", "t:2", "t:1"], told.extend)  # each payer once
    bill.add(Usage(100, 1), 0.3)
    assert told == [Charge("t:1", 51, 0.15), Charge("t:2", 50, 0.15)]
    bill.add(Usage(10, 0), 0.0)
    assert bill.charges() == (Charge("t:1", 56, 0.15), Charge("t:2", 55, 0.15))
    assert Bill([]).charges() == () and split(["t:1"], 0, 0.0) == ()


async def test_a_stopped_run_is_charged_what_it_spent_and_still_after_a_restart(  # type: ignore[no-untyped-def]
        start, llm: FakeLLM) -> None:
    extra = OPEN + "\nlimits: {daily_tokens: 10000}\nruns: {queue_mode: followup, debounce_ms: 0}"
    app, channel = await start(extra)
    llm.script(Reply.tool_calls([Call("list_files", {})], usage=Tokens(9000, 1500)), Reply.hang())
    await channel.inject(tg_dm("do a big job"))
    await llm.wait_for_requests(2, timeout=5)
    await channel.inject(tg_dm("/stop"))
    await channel.wait_for_replies(1)
    assert channel.texts() == ["Stopped."]
    tokens, _ = await app.intake.limits.today("telegram:42")  # counted at once, not at the run's end
    assert tokens >= 10500
    await channel.inject(tg_dm("and another"))
    await channel.wait_for_replies(2)
    assert channel.texts()[1] == "You've used today's allowance of 10,000 tokens; it renews at 00:00 UTC."
    assert await app.store.usage_since("telegram:42", 0) == (tokens, 0.0)  # stored with the stopped turn
    await app.__aexit__(None, None, None)
    app, again = await start(extra)
    await again.inject(tg_dm("after the restart"))  # still refused; and told once a day, restart or not
    for _ in range(200):
        if not await app.store.unanswered():
            break
        await asyncio.sleep(0.02)
    assert not await app.store.unanswered() and again.texts() == []
    assert len(llm.requests) == 2


async def test_an_interrupted_run_is_charged(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    app, channel = await start(OPEN + "\nlimits: {daily_tokens: 100000}\nruns: {queue_mode: interrupt, debounce_ms: 0}")
    llm.script(Reply.tool_calls([Call("list_files", {})], usage=Tokens(3000, 100)), Reply.hang())
    await channel.inject(tg_dm("first"))
    await llm.wait_for_requests(2, timeout=5)
    await channel.inject(tg_dm("never mind, this instead"))
    await channel.wait_for_replies(1)
    tokens, _ = await app.intake.limits.today("telegram:42")
    assert tokens >= 3100 + 12 + 5  # the interrupted run's calls and the new run's


async def test_a_sub_agent_is_charged_once(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    app, channel = await start(OPEN + "\nlimits: {daily_tokens: 100000}")
    llm.script(Reply.tool_calls([Call("spawn", {"task": "look it up"})], usage=Tokens(1000, 10)),
               Reply.text("found it", usage=Tokens(500, 5)),
               Reply.text("done", usage=Tokens(2000, 10)))
    await channel.inject(tg_dm("research this"))
    await channel.wait_for_replies(1)
    assert channel.texts() == ["done"]
    assert await app.store.usage_since("telegram:42", 0) == (1010 + 505 + 2010, 0.0)
    tokens, _ = await app.intake.limits.today("telegram:42")
    assert tokens == 1010 + 505 + 2010


async def test_every_sender_of_a_collected_batch_is_charged(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    app, channel = await start(OPEN + "\nlimits: {daily_tokens: 100000}\nruns: {queue_mode: collect, debounce_ms: 300}")
    llm.script(Reply.text("busy for a while", usage=Tokens(10, 0), delay=0.1),
               Reply.text("both answered", usage=Tokens(100, 20)))
    await channel.inject(group_msg("@bot first", user="u1"))
    await llm.wait_for_requests(1, timeout=5)
    await channel.inject(group_msg("@bot second", user="u2"))  # collected while the first runs
    await channel.inject(group_msg("@bot third", user="u3"))
    await channel.wait_for_replies(2)
    assert len(llm.requests) == 2  # the second and third were one run
    assert await app.store.usage_since("telegram:u1", 0) == (10, 0.0)
    assert await app.store.usage_since("telegram:u2", 0) == (60, 0.0)
    assert await app.store.usage_since("telegram:u3", 0) == (60, 0.0)


async def test_compact_is_within_the_limits_and_its_calls_are_charged(start, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    app, channel = await start(OPEN + "\nlimits: {daily_tokens: 100000}")
    for i in range(3):
        await channel.inject(tg_dm(f"m{i}"))
        await channel.wait_for_replies(i + 1)
    before, _ = await app.store.usage_since("telegram:42", 0)
    llm.script(Reply.text("NO_REPLY", usage=Tokens(700, 3)), Reply.text("a summary", usage=Tokens(400, 20)))
    await channel.inject(tg_dm("/compact"))
    await channel.wait_for_replies(4)
    assert channel.texts()[3].startswith("Compacted")
    assert await app.store.usage_since("telegram:42", 0) == (before + 703 + 420, 0.0)  # flush and summary
    await app.__aexit__(None, None, None)
    app, channel = await start(OPEN + "\nlimits: {daily_tokens: 100}")
    await channel.inject(tg_dm("/compact"))
    await channel.wait_for_replies(1)
    assert channel.texts()[0].startswith("You've used today's allowance")
    assert len(llm.requests) == 5
