"""Several instances on one PostgreSQL database: real `chatgate run` processes (three), the fake
Telegram (webhook behind a round-robin balancer on loopback, or polling) and the fake LLM in this
test process (tests/cluster_bed.py). Every message answered exactly once; one session's messages
run in order, one at a time, wherever they arrive; /stop through another instance; SIGKILL of
the instance running a turn, of the one sending a due reminder, of the one running a scheduled
task, and of the Telegram poller."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cluster_bed import ROOT, TOKEN, Instances, wait_until
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram, Sent
from tests.pg import fresh_database

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Instances]:
    options = getattr(request, "param", {})
    async with fresh_database() as url, FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
            Instances(tmp_path, url, llm, tg, **options) as instances:
        await instances.start()
        yield instances


def sent_to(tg: FakeTelegram, chat_id: int) -> list[Sent]:
    return [s for s in tg.sent if s.chat_id == chat_id]


def last_user_text(llm: FakeLLM, index: int) -> str:
    messages = llm.requests[index].body["messages"]
    text = str(next(m["content"] for m in reversed(messages) if m["role"] == "user"))
    return text.split("\n\n<chatgate-context", 1)[0]


async def test_every_message_is_answered_exactly_once_across_three_instances(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    chats = [1000 + n for n in range(24)]
    updates = [tg.message(chat, f"hello from {chat}", user_id=chat) for chat in chats]
    statuses = await asyncio.gather(*(cluster.post(u) for u in updates))
    assert statuses == [200] * len(updates)
    assert min(cluster.balancer.hits) >= 7  # every instance took its share
    for update in updates[:6]:  # Telegram sends some again (to other instances): deduped in the shared store
        assert await cluster.post(update) == 200
    await wait_until(lambda: all(sent_to(tg, c) for c in chats), 30, "every chat answered", cluster.tails)
    await asyncio.sleep(1.5)
    assert sorted((s.chat_id, s.plain) for s in tg.sent) == [(c, f"echo: hello from {c}") for c in chats]
    assert len(llm.requests) == len(chats)
    assert await cluster.query("SELECT count(*) FROM inbound WHERE answered_at IS NULL") == [(0,)]
    status = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", "status", "-c",
                                                  str(cluster.config(cluster.items[0])), cwd=ROOT,
                                                  stdout=asyncio.subprocess.PIPE)
    out, _ = await status.communicate()
    text = out.decode()
    assert "3 instances alive" in text and all(f"  {i.name} " in text for i in cluster.items), text
    assert "lag: 0 messages not answered yet; 0 answers not delivered yet" in text, text


@pytest.mark.parametrize("cluster", [{"runs": {"queue_mode": "followup", "debounce_ms": 0}}], indirect=True)
async def test_one_sessions_messages_run_in_order_one_at_a_time_wherever_they_arrive(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    llm.script(*(Reply.text(f"answer {n}", chunk_size=4, delay=0.05) for n in range(4)))
    for n in range(4):  # round robin: the four land on three instances
        assert await cluster.post(tg.message(77, f"question {n}", user_id=77)) == 200
        await asyncio.sleep(0.05)
    await wait_until(lambda: len(sent_to(tg, 77)) == 4, 40, "four answers", cluster.tails)
    assert [last_user_text(llm, n) for n in range(4)] == [f"question {n}" for n in range(4)]
    for before, after in zip(llm.requests, llm.requests[1:]):  # never two at once
        assert before.finished.is_set() and after.started >= before.ended[0], (before.index, after.index)
    assert [s.plain for s in sent_to(tg, 77)] == [f"answer {n}" for n in range(4)]


async def test_stop_sent_through_another_instance_stops_the_run_where_it_runs(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    llm.script(Reply.text("once upon a time " * 200, chunk_size=8, delay=0.05))
    assert await cluster.post(tg.message(55, "tell me a long story", user_id=55)) == 200
    await llm.wait_for_requests(1, timeout=10)
    runner = await cluster.holder("session:agent:main:telegram:dm:55")
    cluster.balancer.aim((cluster.items.index(runner) + 2) % len(cluster.items))
    assert await cluster.post(tg.message(55, "/status", user_id=55)) == 200  # handed to the lane's owner
    await wait_until(lambda: sent_to(tg, 55), 10, "the /status answered", cluster.tails)
    assert "a run is active" in (sent_to(tg, 55)[0].plain or "")
    cluster.balancer.aim((cluster.items.index(runner) + 1) % len(cluster.items))
    hits = list(cluster.balancer.hits)
    sent = time.monotonic()
    assert await cluster.post(tg.message(55, "/stop", user_id=55)) == 200
    took = [i for i, (a, b) in enumerate(zip(hits, cluster.balancer.hits)) if b > a]
    assert [cluster.items[i].name for i in took] != [runner.name]  # another instance received the /stop
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 5)
    closed = time.monotonic() - sent
    await wait_until(lambda: len(sent_to(tg, 55)) == 2, 10, "the /stop answered",
                     lambda: f"sent {[s.plain for s in tg.sent]}; model asked {[last_user_text(llm, r.index) for r in llm.requests]}\n"
                             + cluster.tails(60))
    await asyncio.sleep(1.0)
    assert [s.plain for s in sent_to(tg, 55)][1:] == ["Stopped."]
    assert closed < 1.0, f"the model stream closed {closed:.3f} s after the /stop"
    assert len(llm.requests) == 1


async def test_sigkill_of_the_instance_running_a_turn_is_answered_once_by_another(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    llm.script(Reply.text("slow answer " * 100, chunk_size=8, delay=0.05))
    assert await cluster.post(tg.message(66, "hello?", user_id=66)) == 200
    await llm.wait_for_requests(1, timeout=10)
    runner = await cluster.holder("session:agent:main:telegram:dm:66")
    await cluster.kill(runner)
    killed = time.monotonic()
    await wait_until(lambda: sent_to(tg, 66), 30, "an answer from another instance", cluster.tails)
    took = time.monotonic() - killed
    await asyncio.sleep(2 * cluster.lease_seconds)
    assert [s.plain for s in sent_to(tg, 66)] == ["echo: hello?"]  # asked again once, answered once
    assert len(llm.requests) == 2
    assert took < 4 * cluster.lease_seconds, took


@pytest.mark.parametrize("cluster", [{"tools": {"approval": {"write_file": "ask"}}}], indirect=True)
async def test_an_approval_is_answered_through_another_instance(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    llm.script(Reply.tool_calls([Call("write_file", {"path": "notes.md", "content": "hello"})]), Reply.text("Saved."))
    assert await cluster.post(tg.message(88, "save a note", user_id=88)) == 200
    await wait_until(lambda: sent_to(tg, 88), 15, "the approval card", cluster.tails)
    card = sent_to(tg, 88)[0]
    [once] = [data for data in tg.buttons(88, card.message_id) if data.endswith(":o")]
    runner = await cluster.holder("session:agent:main:telegram:dm:88")
    cluster.balancer.aim((cluster.items.index(runner) + 1) % len(cluster.items))  # the press reaches another one
    assert await cluster.post(tg.press(88, card.message_id, once, user_id=88)) == 200
    await wait_until(lambda: len(sent_to(tg, 88)) >= 2, 15, "approved and answered", cluster.tails)
    await asyncio.sleep(0.5)
    assert [s.plain for s in sent_to(tg, 88)[1:]] == ["Saved."]
    assert tg.messages[(88, card.message_id)]["text"] == "✅ write_file allowed once by Alice."
    assert not tg.buttons(88, card.message_id)  # the card shows the outcome, no buttons left
    assert (cluster.tmp / "workspaces" / "telegram-88" / "notes.md").read_text() == "hello"


@pytest.mark.parametrize("cluster", [{"tools": {"approval": {"write_file": "ask"}}}], indirect=True)
async def test_a_card_whose_instance_died_is_closed_and_the_message_asks_again_elsewhere(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    ask = Reply.tool_calls([Call("write_file", {"path": "notes.md", "content": "hello"})])
    llm.script(ask, ask, Reply.text("Saved."))
    assert await cluster.post(tg.message(89, "save a note", user_id=89)) == 200
    await wait_until(lambda: sent_to(tg, 89), 15, "the approval card", cluster.tails)
    first = sent_to(tg, 89)[0]
    runner = await cluster.holder("session:agent:main:telegram:dm:89")
    await cluster.kill(runner)  # its run dies waiting for the answer
    await wait_until(lambda: len(sent_to(tg, 89)) == 2 and not tg.buttons(89, first.message_id), 30,
                     "the message asking again on another instance, the first card closed", cluster.tails)
    assert "this question expired" in tg.messages[(89, first.message_id)]["text"]
    second = sent_to(tg, 89)[1]
    [once] = [data for data in tg.buttons(89, second.message_id) if data.endswith(":o")]
    assert await cluster.post(tg.press(89, second.message_id, once, user_id=89)) == 200
    await wait_until(lambda: len(sent_to(tg, 89)) == 3, 15, "approved and answered", cluster.tails)
    assert sent_to(tg, 89)[2].plain == "Saved."
    assert await cluster.query("SELECT outcome FROM approvals ORDER BY asked_at") == [("expired",), ("allowed",)]


@pytest.mark.parametrize("cluster", [{"telegram_keys": {"dm_policy": "pairing"}}], indirect=True)
async def test_a_pairing_code_from_one_instance_is_approved_once_for_all(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    cluster.balancer.aim(0)
    assert await cluster.post(tg.message(91, "hi", user_id=91)) == 200
    await wait_until(lambda: sent_to(tg, 91), 10, "the pairing code", cluster.tails)
    code = (sent_to(tg, 91)[0].plain or "").split("chatgate pairing approve ")[1].split()[0]
    approve = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", "pairing", "-c",
                                                   str(cluster.config(cluster.items[1])), "approve", code, cwd=ROOT,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await approve.communicate()
    assert approve.returncode == 0, err.decode()
    assert out.decode().startswith("approved telegram:91")
    cluster.balancer.aim(2)  # the next message reaches a third instance
    assert await cluster.post(tg.message(91, "hi again", user_id=91)) == 200
    await wait_until(lambda: len(sent_to(tg, 91)) == 2, 10, "answered once paired", cluster.tails)
    assert sent_to(tg, 91)[1].plain == "echo: hi again"
    assert len(llm.requests) == 1  # the first message ran nothing


async def test_a_reminder_due_while_its_claimer_dies_is_delivered_once_by_another(cluster: Instances) -> None:
    tg = cluster.tg
    assert await cluster.post(tg.message(77, "/remind in 2s drink water", user_id=77)) == 200
    await wait_until(lambda: sent_to(tg, 77), 10, "the reminder confirmed", cluster.tails)
    confirmed = sent_to(tg, 77)[0].plain
    calls = len([c for c in tg.calls if c.method == "sendMessage"])
    tg.hold("sendMessage")
    await tg.wait_for_calls("sendMessage", calls + 1, timeout=10)  # the reminder is due: its send hangs...
    [(claimer,)] = await cluster.query("SELECT instance FROM cluster_deliveries WHERE answer_id LIKE 'job-1-%'")
    await cluster.kill(cluster.by_name(claimer))  # ...and the instance that claimed it dies in it
    tg.release("sendMessage")
    await wait_until(lambda: len(sent_to(tg, 77)) == 2, 30, "the reminder from another instance", cluster.tails)
    await asyncio.sleep(2 * cluster.lease_seconds)
    assert [s.plain for s in sent_to(tg, 77)] == [confirmed, "⏰ Reminder: drink water"]
    assert await cluster.query("SELECT state, outcome FROM occurrences") == [("closed", "sent")]


async def test_a_task_whose_instance_dies_while_it_runs_is_run_once_by_another(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "2s",
                                                   "text": "Tell them the magic word."})]),
               Reply.text("I'll tell you in 2 seconds."),
               Reply.text("slow answer " * 100, chunk_size=8, delay=0.05),  # the task's first run: cut short
               Reply.text("The magic word is xyzzy."))
    assert await cluster.post(tg.message(78, "in 2s: tell me the magic word", user_id=78)) == 200
    await llm.wait_for_requests(3, timeout=15)  # the task's turn streams on its claimer...
    [(claimer,)] = await cluster.query("SELECT claimer FROM occurrences WHERE state = 'running'")
    await cluster.kill(cluster.by_name(claimer))  # ...which dies
    await wait_until(lambda: len(sent_to(tg, 78)) == 2, 30, "the task's answer from another instance",
                     cluster.tails)
    await asyncio.sleep(2 * cluster.lease_seconds)
    assert [s.plain for s in sent_to(tg, 78)] == ["I'll tell you in 2 seconds.", "The magic word is xyzzy."]
    assert len(llm.requests) == 4  # run again once
    assert "Tell them the magic word." in last_user_text(llm, 3)
    assert await cluster.query("SELECT outcome, claimer <> $1 FROM occurrences", claimer) == [("completed", True)]


@pytest.mark.parametrize("cluster", [{"mode": "polling"}], indirect=True)
async def test_sigkill_of_the_telegram_poller_hands_polling_to_another_without_losing_updates(
        cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    poller = await cluster.holder("telegram:poller:123456")
    for n in range(5):
        tg.push(tg.message(200 + n, f"before {n}", user_id=200 + n))
    await wait_until(lambda: len(tg.sent) == 5, 20, "the first five answered", cluster.tails)
    while await cluster.query("SELECT 1 FROM answers WHERE delivered_at IS NULL"):  # and recorded as sent
        await asyncio.sleep(0.05)
    tg.hold("sendMessage")  # answers of the next ones hang: the poller dies with them unsent
    for n in range(5):
        tg.push(tg.message(300 + n, f"during {n}", user_id=300 + n))
    await cluster.kill(poller)
    for n in range(5):
        tg.push(tg.message(400 + n, f"after {n}", user_id=400 + n))
    tg.release("sendMessage")
    successor = await cluster.holder("telegram:poller:123456", timeout=20, not_=poller)
    assert successor.alive
    chats = [200 + n for n in range(5)] + [300 + n for n in range(5)] + [400 + n for n in range(5)]
    await wait_until(lambda: all(sent_to(tg, c) for c in chats), 40, "every update answered", cluster.tails)
    await asyncio.sleep(1.5)
    assert sorted(s.chat_id for s in tg.sent) == sorted(chats), cluster.tails(200)  # each once
    assert all(i.alive for i in cluster.items if i is not poller)
    for instance in cluster.items:
        assert "another program is polling" not in instance.log.read_text(errors="replace")
    assert not tg.pending


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_slack_behind_a_balancer_or_a_socket_per_instance_answers_each_event_once(
        tmp_path: Path, mode: str) -> None:
    async with fresh_database() as url, FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, FakeSlack() as slack, \
            Instances(tmp_path, url, llm, tg, mode=mode, slack=slack) as cluster:
        await cluster.start()
        if mode == "socket":
            await wait_until(lambda: len(slack.sockets) == 3, 10, "a socket per instance", cluster.tails)
        events = [slack.event(slack.message(f"D{n}", f"hello {n}", user=f"U{n}")) for n in range(12)]
        for event in events:
            if mode == "http":
                status, _ = await slack.post_event(f"{cluster.balancer.url}/slack/events", event)
                assert status == 200
            else:
                await slack.wait_for_ack(await slack.push(event))
        if mode == "http":  # Slack retries one (it timed out on its side): another instance gets it
            assert (await slack.post_event(f"{cluster.balancer.url}/slack/events", events[0], retry_num=1))[0] == 200
            assert min(cluster.balancer.hits) >= 4
        await slack.wait_for_posts(12, timeout=30)
        await asyncio.sleep(1.0)
        posts = [p for p in slack.posts if p.method == "chat.postMessage"]
        assert sorted((p.channel, p.text) for p in posts) == sorted((f"D{n}", f"echo: hello {n}") for n in range(12))
        assert len(llm.requests) == 12
