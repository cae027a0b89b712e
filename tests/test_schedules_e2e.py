"""Reminders and scheduled tasks end to end (issue 23): ``chatgate run`` as a real process against
the fake Telegram and the fake LLM, real time, real signals. A reminder one second ahead is
delivered once and within 2 s of its time; a task's answer is delivered and is in the next
turn's history; a NO_REPLY task sends nothing; SIGKILL while a due reminder is being sent,
then a restart: delivered exactly once; a restart across the due time within the grace (late
by) and beyond it (the missed list)."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from tests.fakes.llm_server import Call, Reply
from tests.test_durability import DM_USER, Bot, bot, prompt, sent_to  # noqa: F401 (bot is a fixture)

pytestmark = pytest.mark.timeout(90)


async def texts_to(b: Bot, count: int, timeout: float = 15.0) -> list[str]:
    try:
        await b.tg.wait_for(lambda: len(sent_to(b.tg, DM_USER)) >= count, timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"{len(sent_to(b.tg, DM_USER))} of {count} messages came; bot log:\n{b.tail()}") from None
    return [s.plain or "" for s in sent_to(b.tg, DM_USER)]


def move_job(b: Bot, job_id: int, at: int) -> None:
    """Move a job's time while the bot is down, as if it had passed meanwhile."""
    with sqlite3.connect(b.db) as db:
        db.execute("UPDATE jobs SET anchor = ?, next_at = ? WHERE id = ?", (at, at, job_id))


async def test_a_reminder_one_second_ahead_is_delivered_once(bot: Bot) -> None:
    await bot.start()
    bot.tg.push(bot.tg.message(DM_USER, "/remind in 1s stretch your legs", user_id=DM_USER))
    confirmed = (await texts_to(bot, 1))[0]
    assert confirmed.startswith("I'll remind you ") and "It is job 1: /tasks cancel 1 cancels it." in confirmed
    [(due,)] = bot.query("SELECT anchor FROM jobs WHERE id = 1")
    texts = await texts_to(bot, 2, timeout=5)
    seen = time.time()
    assert texts[1] == "⏰ Reminder: stretch your legs"
    assert seen - due < 2.0, f"sent {seen - due:.2f} s after its time"
    await asyncio.sleep(1.5)
    assert len(sent_to(bot.tg, DM_USER)) == 2 and not bot.llm.requests  # no model call for a reminder
    assert bot.query("SELECT state FROM jobs") == [("done",)]


async def ask_for_a_task(b: Bot, after: str, task: str, confirmation: str, answer: str) -> None:
    """The person asks; the model makes a task with the schedule tool and confirms; the task's
    turn will answer ``answer``."""
    await b.start()
    b.llm.script(Reply.tool_calls([Call("schedule", {"action": "create", "kind": "task", "after": after,
                                                     "text": task})]),
                 Reply.text(confirmation), Reply.text(answer))
    b.tg.push(b.tg.message(DM_USER, f"in {after}: {task}", user_id=DM_USER))


async def test_a_tasks_answer_is_delivered_and_in_the_next_turns_history(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await ask_for_a_task(bot, "2s", "Tell them the magic word.", "Done: I'll tell you in 2 seconds.",
                         "The magic word is xyzzy.")
    texts = await texts_to(bot, 2)
    assert texts == ["Done: I'll tell you in 2 seconds.", "The magic word is xyzzy."]
    assert "Made task 1: once, " in prompt(llm, 1)  # the tool's answer, times in the person's zone
    task_prompt = prompt(llm, 2)
    assert "[Scheduled task 1 (once)" in task_prompt and "Tell them the magic word." in task_prompt
    tg.push(tg.message(DM_USER, "what was the word?", user_id=DM_USER))
    await texts_to(bot, 3)
    assert "The magic word is xyzzy." in prompt(llm, 3)  # the task's answer is in the history
    assert bot.query("SELECT outcome FROM occurrences") == [("completed",)]


async def test_a_no_reply_task_sends_nothing(bot: Bot) -> None:
    tg, llm = bot.tg, bot.llm
    await ask_for_a_task(bot, "1s", "Tell them only if the build failed.", "Watching the build.", "NO_REPLY")
    await texts_to(bot, 1)
    await llm.wait_for_requests(3, timeout=10)
    await asyncio.sleep(1.5)
    assert [s.plain for s in sent_to(tg, DM_USER)] == ["Watching the build."]
    assert bot.query("SELECT outcome FROM occurrences") == [("silent",)]


async def test_sigkill_while_a_due_reminder_is_sent_delivers_it_once(bot: Bot) -> None:
    tg = bot.tg
    await bot.start()
    tg.push(tg.message(DM_USER, "/remind in 2s drink water", user_id=DM_USER))
    await texts_to(bot, 1)
    calls = len([c for c in tg.calls if c.method == "sendMessage"])
    tg.hold("sendMessage")
    await tg.wait_for_calls("sendMessage", calls + 1, timeout=10)  # the reminder's send hangs...
    assert bot.query("SELECT COUNT(*) FROM answers WHERE id LIKE 'job-1-%' AND delivered_at IS NULL") == [(1,)]
    await bot.kill()  # ...and the process dies in it
    tg.release("sendMessage")
    await bot.start()
    texts = await texts_to(bot, 2)
    await asyncio.sleep(2.0)
    assert [s.plain for s in sent_to(tg, DM_USER)] == [texts[0], "⏰ Reminder: drink water"]


async def test_a_restart_within_the_grace_runs_it_late(bot: Bot) -> None:
    tg = bot.tg
    await bot.start()
    tg.push(tg.message(DM_USER, "/remind in 1h call the bank", user_id=DM_USER))
    await texts_to(bot, 1)
    assert await bot.terminate() == 0
    move_job(bot, 1, int(time.time()) - 600)  # its time passed ten minutes ago, while the bot was down
    await bot.start()
    texts = await texts_to(bot, 2)
    assert texts[1] == "⏰ Reminder (late by 10 min): call the bank"


async def test_a_restart_beyond_the_grace_lists_what_was_missed(bot: Bot) -> None:
    tg = bot.tg
    await bot.start()
    tg.push(tg.message(DM_USER, "/remind in 1h call the bank", user_id=DM_USER))
    tg.push(tg.message(DM_USER, "/remind in 2h water the plants", user_id=DM_USER))
    await texts_to(bot, 2)
    assert await bot.terminate() == 0
    move_job(bot, 1, int(time.time()) - 3 * 3600)  # both passed beyond the grace (1 h)
    move_job(bot, 2, int(time.time()) - 2 * 3600)
    await bot.start()
    texts = await texts_to(bot, 3)
    assert texts[2].startswith("While I was offline, these were due and did not run:")
    assert "reminder 1, due " in texts[2] and "call the bank" in texts[2] and "water the plants" in texts[2]
    assert bot.query("SELECT state FROM jobs ORDER BY id") == [("missed",), ("missed",)]
    assert await bot.terminate() == 0
    await bot.start()
    await asyncio.sleep(1.5)
    assert len(sent_to(tg, DM_USER)) == 3  # listed once

