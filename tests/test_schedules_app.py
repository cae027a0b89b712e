"""Schedules in the whole bot, in process (issue 23): /remind, /tasks, /tz and /status as people
use them; the schedule tool as the model calls it; a removed person's job paused and the
owners' ``chatgate schedules`` showing why; a check skipping the model; the limits."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from bot.app import App
from bot.schedules.jobs import JobState
from bot.schedules.store import StoredSchedules
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.test_cli import base_env, run_cli
from tests.test_gateway_runs import config

OWNER, ADA, BOB = "1", "42", "43"
ACCESS = (f"channels: {{telegram: {{dm_policy: pairing, allow_from: ['{ADA}', '{BOB}'], owners: ['{OWNER}']}}}}\n"
          "schedules: {default_timezone: Europe/Berlin, max_per_person: 3}")

Start = Callable[..., Awaitable[tuple[App, RecordingChannel]]]


@pytest.fixture
async def started(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Start]:
    apps: list[App] = []

    async def start(extra: str = "") -> tuple[App, RecordingChannel]:
        channel = RecordingChannel("telegram")
        app = App(config(tmp_path, llm, f"{ACCESS}\n{extra}"), {"telegram": channel})
        channel.watch(app.events)
        await app.__aenter__()
        apps.append(app)
        return app, channel

    yield start
    for app in reversed(apps):
        await app.__aexit__(None, None, None)


async def say(channel: RecordingChannel, user: str, text: str, timeout: float = 5.0) -> str:
    """Send ``text`` as ``user``; the next reply in their chat."""
    before = len([s for s in channel.sent if s.chat_id == user])
    await channel.inject(dm(text, user, platform="telegram"))
    async with channel._changed:  # noqa: SLF001 - the fake's own condition
        await asyncio.wait_for(channel._changed.wait_for(  # noqa: SLF001
            lambda: len([s for s in channel.sent if s.chat_id == user]) > before), timeout)
    return [s.text for s in channel.sent if s.chat_id == user][before]


async def test_remind_tasks_and_tz_as_people_use_them(started: Start) -> None:
    app, channel = await started()
    assert (await say(channel, ADA, "/tz")).startswith("Your time zone is Europe/Berlin (default).")
    assert await say(channel, ADA, "/tz america/new_york") == (
        "Your time zone is America/New_York now; your reminders and tasks are shown in it.")
    assert "Mars/Base" in await say(channel, ADA, "/tz Mars/Base")
    made = await say(channel, ADA, "/remind tomorrow 9:00 call the dentist")
    assert made.startswith("I'll remind you ") and " 09:00 E" in made and "(America/New_York)" in made
    assert "job 1" in made
    assert "Usage: /remind" in await say(channel, ADA, "/remind whenever")
    listed = await say(channel, ADA, "/tasks")
    assert listed.startswith("Your jobs here (times in America/New_York):\n1 · reminder · next ")
    assert "09:00 E" in listed and listed.splitlines()[1].endswith("· call the dentist")
    assert (await say(channel, ADA, "/tasks pause 1")).startswith("Paused: 1 · reminder · paused ·")
    assert (await say(channel, ADA, "/tasks resume 1")).startswith("Resumed: 1 · reminder · next ")
    assert "no job 1 here" in await say(channel, BOB, "/tasks cancel 1")  # not Bob's
    assert (await say(channel, ADA, "/tasks cancel 1")).startswith("Cancelled: 1 · reminder · cancelled ·")
    assert (await say(channel, ADA, "/tasks")).startswith("You have no reminders or scheduled tasks here.")
    assert "Time zone: America/New_York (yours)" in await say(channel, ADA, "/status")
    assert "Time zone: Europe/Berlin (default)" in await say(channel, BOB, "/status")
    assert "/remind" in await say(channel, ADA, "/help")


async def test_a_person_has_at_most_max_per_person_jobs(started: Start) -> None:
    _, channel = await started()
    for n in range(3):
        assert (await say(channel, ADA, f"/remind in {n + 1}h note {n}")).startswith("I'll remind you")
    refused = await say(channel, ADA, "/remind in 4h one too many")
    assert refused.startswith("You have 3 jobs already (the most one person may have); cancel one first.")
    assert (await say(channel, BOB, "/remind in 4h mine")).startswith("I'll remind you")


async def test_the_model_makes_lists_and_cancels_jobs_with_times_in_the_persons_zone(
        started: Start, llm: FakeLLM) -> None:
    app, channel = await started()
    await say(channel, ADA, "/tz Asia/Tokyo")
    llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "cron": "0 9 * * MON",
                                                   "text": "Summarise my notes.", "prompt": "minimal"})]),
               Reply.text("ok"),
               Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "every": "1m",
                                                   "text": "spam"})]),
               Reply.text("ok"),
               Reply.tool_calls([Call("schedule", {"action": "list"})]),
               Reply.text("ok"),
               Reply.tool_calls([Call("schedule", {"action": "cancel", "job_id": 1})]),
               Reply.text("ok"))
    for text in ("every monday at 9 summarise my notes", "every minute spam me", "what do I have?", "cancel it"):
        await say(channel, ADA, text)
    results = [json.dumps(r.body["messages"][-1], ensure_ascii=False) for r in llm.requests[1::2]]
    assert "Made task 1: cron 0 9 * * MON (Asia/Tokyo), first Mon " in results[0] and "09:00 JST" in results[0]
    assert "at most every 5m" in results[1]  # schedules.min_interval
    assert "1 · task, cron 0 9 * * MON (Asia/Tokyo) · next Mon" in results[2]
    assert "Cancelled: 1 · task" in results[3]
    [job] = await StoredSchedules(app.store).jobs(states=(JobState.CANCELLED,))
    assert job.prompt == "minimal" and job.creator == ADA


async def test_a_check_command_is_taken_only_from_someone_who_may_run_commands(
        started: Start, llm: FakeLLM) -> None:
    _, channel = await started()
    llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "1h",
                                                   "text": "tell me", "check_command": "cat /etc/passwd"})]),
               Reply.text("ok"))
    await say(channel, ADA, "check my files every hour")
    assert "a check_command needs the exec tool" in json.dumps(llm.requests[1].body["messages"][-1])


async def test_a_check_skips_the_model_when_there_is_nothing_to_do(started: Start, llm: FakeLLM) -> None:
    app, channel = await started()
    llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "1s",
                                                   "text": "Tell me if the build failed.", "check_command": "true"})]),
               Reply.text("watching"),
               Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": "1s",
                                                   "text": "Tell me if the build failed.",
                                                   "check_command": "echo build 41 failed"})]),
               Reply.text("watching"),
               Reply.text("Build 41 failed."))
    assert await say(channel, OWNER, "watch the build") == "watching"  # an owner may have commands run
    deadline, jobs = time.monotonic() + 10, StoredSchedules(app.store)
    while (await jobs.jobs() or await jobs.unclosed()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert await jobs.jobs() == [] and await jobs.unclosed() == []
    assert len(llm.requests) == 2  # the check said there was nothing to do: no model call
    assert await say(channel, OWNER, "watch the other build") == "watching"
    await channel.wait_for_replies(3, timeout=10)
    assert channel.sent[2].text == "Build 41 failed."
    await llm.wait_for_requests(5, timeout=10)
    assert "Output of its check:\\n```\\nbuild 41 failed\\n```" in json.dumps(llm.requests[4].body["messages"])


async def test_a_removed_persons_job_is_paused_and_the_owners_see_why(started: Start, tmp_path: Path) -> None:
    app, channel = await started()
    code = await app.store.pairing_request("telegram", "77", "Eve", now=time.time())
    assert code is not None and await app.store.approve_pairing(code.code, time.time()) is not None
    assert (await say(channel, "77", "/remind in 2s look outside")).startswith("I'll remind you")
    assert await app.store.revoke_sender("telegram", "77")  # Eve may no longer use the bot
    await asyncio.sleep(3.0)
    assert [s.text for s in channel.sent if s.chat_id == "77"][1:] == []
    [job] = await StoredSchedules(app.store).jobs(person="telegram:77")
    assert job.state is JobState.PAUSED and job.reason == "its creator may no longer use the bot in this chat"
    await app.__aexit__(None, None, None)  # the CLI reads the store beside (or without) the bot
    (tmp_path / "cli.yaml").write_text(f"storage: {{path: '{tmp_path / 'chatgate.db'}'}}\n")
    listed = run_cli("schedules", "-c", str(tmp_path / "cli.yaml"), cwd=tmp_path, env=base_env())
    assert listed.returncode == 0, listed.stderr
    assert "paused (its creator may no longer use the bot in this chat)" in listed.stdout
    assert "telegram:77 by 77 (User 77)  look outside" in listed.stdout
    cancelled = run_cli("schedules", "-c", str(tmp_path / "cli.yaml"), "cancel", str(job.id), cwd=tmp_path,
                        env=base_env())
    assert cancelled.returncode == 0 and cancelled.stdout.startswith(f"cancelled {job.id}  reminder")
    again = run_cli("schedules", "-c", str(tmp_path / "cli.yaml"), "cancel", str(job.id), cwd=tmp_path,
                    env=base_env())
    assert again.returncode == 1 and "no active or paused job" in again.stderr
    assert run_cli("schedules", "-c", str(tmp_path / "cli.yaml"), cwd=tmp_path, env=base_env()).stdout == "no jobs\n"
