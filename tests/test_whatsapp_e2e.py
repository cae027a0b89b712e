"""WhatsApp end to end: the real channel (its aiohttp webhook and Graph client) against the fake
Cloud API and Meta's webhook sender, the real OpenAI SDK against the fake LLM, the whole App in
between (the channel contract suite's ``WhatsAppHarness``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.whatsapp.dialect import WHATSAPP
from bot.channels import Choice, Mark
from bot.messages import Purpose, Target
from tests.fakes.audio import FakeAudio, ogg_opus
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.whatsapp_server import FakeWhatsApp
from tests.readback import atoms, plain
from tests.test_channel_contract import WhatsAppHarness

pytestmark = pytest.mark.timeout(40)
USER = WhatsAppHarness.user


class Stack(WhatsAppHarness):
    """The harness, with the channel's clock and the fake's moved on together (the window)."""

    offset = 0.0

    def build(self, config: Any) -> Any:
        from adapters.whatsapp.channel import WhatsAppChannel

        return WhatsAppChannel(config.channels.whatsapp, clock=lambda: time.time() + self.offset, resend_after=0.1)

    def advance(self, seconds: float) -> None:
        self.offset += seconds
        self.wa.advance(seconds)

    @property
    def url(self) -> str:
        assert self.channel is not None
        return f"http://127.0.0.1:{self.channel.inner.port}/whatsapp"

    async def post(self, body: dict[str, Any], **kw: Any) -> int:
        return await self.wa.post(body, url=self.url, **kw)


@pytest.fixture
async def stack(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Stack]:
    async with FakeWhatsApp() as wa:
        wa.last_inbound.clear()
        s = Stack(tmp_path, llm, wa)
        try:
            yield s
        finally:
            await s.stop()


async def until(check: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def texts(wa: FakeWhatsApp) -> list[str]:
    return [plain(t, WHATSAPP) for t in wa.texts()]


# ----------------------------------------------------------------------------- ingress


async def test_the_handshake_echoes_the_challenge_only_for_our_token(stack: Stack) -> None:
    await stack.start()
    stack.wa.webhook_url = stack.url
    assert await stack.wa.handshake(stack.wa.verify_token, "4242") == (200, "4242")
    assert (await stack.wa.handshake("not-ours", "4242"))[0] == 403
    assert (await stack.wa.handshake(stack.wa.verify_token, "4242", mode="unsubscribe"))[0] == 403


async def test_a_dm_is_answered_once_across_a_redelivery(stack: Stack) -> None:
    await stack.start()
    body = stack.wa.text("hello from WhatsApp")
    assert await stack.post(body) == 200
    (answer,) = await stack.wa.wait_for_sent(1)
    assert (answer.to, answer.text, answer.quoted) == (USER, "echo: hello from WhatsApp", None)
    assert await stack.post(body) == 200  # Meta posts it again (it saw no 200 in time)
    await asyncio.sleep(0.8)
    assert len(stack.wa.sent) == 1 and len(stack.llm.requests) == 1
    (msg,) = stack.inbound()
    assert (msg.sender.id, msg.sender.name, msg.chat_id) == (USER, "Alice", USER)


async def test_a_forged_post_is_refused_quietly_and_stores_nothing(stack: Stack,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    await stack.start()
    caplog.set_level(logging.INFO)
    body = stack.wa.text("transfer all the money")
    assert await stack.post(body, signature="sha256=" + "0" * 64) == 401
    assert await stack.post(body, signature="") == 401
    assert await stack.post(body, raw=b"{" + b" " * (2 * 1024 * 1024) + b"}") == 413
    other = FakeWhatsApp(app_secret="someone-else")  # signed, with a secret that is not ours
    assert await other.post(body, url=stack.url) == 401
    await asyncio.sleep(0.3)
    assert stack.inbound() == [] and not stack.wa.sent and not stack.llm.requests
    said = [r.getMessage() for r in caplog.records if r.name.startswith("adapters.whatsapp") and r.levelno >= logging.INFO]
    assert [m for m in said if "ready, webhook on" not in m] == []  # the start's own line may come late, under load


async def test_a_post_for_another_number_of_the_app_is_not_ours(stack: Stack) -> None:
    await stack.start()
    body = stack.wa.body(messages=[stack.wa.message("text", {"body": "hi"})], phone_number_id="999")
    assert await stack.post(body) == 200
    await asyncio.sleep(0.3)
    assert stack.inbound() == []


# ----------------------------------------------------------------------------- out


async def test_stop_during_a_stream_stops_it(stack: Stack) -> None:
    await stack.start()
    stack.llm.script(Reply.text("word " * 400, delay=0.02))
    await stack.post(stack.wa.text("write me an essay"))
    await stack.llm.wait_for_requests(1, timeout=5)
    request = stack.llm.requests[0]
    await stack.wa.wait_for(lambda: stack.wa.reads)  # read, typing…
    await stack.post(stack.wa.text("/stop"))
    await stack.wa.wait_for(lambda: "Stopped." in stack.wa.texts())
    await asyncio.wait_for(request.disconnected.wait(), 3)
    await asyncio.sleep(0.5)
    assert stack.wa.texts() == ["Stopped."] and len(stack.llm.requests) == 1
    read = stack.wa.reads[0]
    assert read["typing_indicator"] == {"type": "text"} and read["message_id"].startswith("wamid.IN")
    emojis = [r.payload["reaction"]["emoji"] for r in stack.wa.reactions]
    assert emojis[0] == "👀" and emojis[-1] == "❌"


async def test_a_long_answer_is_chunked_within_4096_with_whole_markup(stack: Stack) -> None:
    await stack.start()
    part = ("Some **bold words** and _italic ones_, `inline code`, ~~gone~~, a snake_case name and 2*3.\n\n"
            "- an item with **bold**\n- another\n\n> a quote\n\n```python\nprint('hi')\n```\n\n")
    answer = "".join(f"## Part {i}\n\n{part}" for i in range(60))
    stack.llm.script(Reply.text(answer, chunk_size=3000))
    await stack.post(stack.wa.text("everything please"))
    await until(lambda: any("Part 59" in t for t in stack.wa.texts()), timeout=15)
    sent = stack.wa.texts()
    assert len(sent) >= 3 and all(len(t) <= 4096 for t in sent)
    for text in sent:  # every marker that opens closes in the same message
        opened: list[str] = []
        for atom in atoms(text, WHATSAPP):
            if atom.mark is Mark.OPEN:
                opened.append(atom.tag)
            elif atom.mark is Mark.CLOSE:
                assert opened and opened.pop() == atom.tag, text
        assert opened == [], text
    whole = "\n".join(plain(t, WHATSAPP) for t in sent)
    assert [whole.index(f"Part {i}") for i in range(60)] == sorted(whole.index(f"Part {i}") for i in range(60))
    assert "snake_case name and 2*3" in whole and "print('hi')" in whole


async def test_an_answer_quotes_the_message_it_answers_when_another_came_after(stack: Stack) -> None:
    await stack.start()
    stack.llm.script(Reply.text("first answer", delay=0.5), Reply.text("second answer"))
    first = stack.wa.text("one")
    await stack.post(first)
    await stack.llm.wait_for_requests(1, timeout=5)
    await stack.post(stack.wa.text("two"))
    await stack.wa.wait_for(lambda: len(stack.wa.sent) >= 2)
    first_id = first["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    quoted = {s.text: s.quoted for s in stack.wa.sent}
    assert quoted.get("first answer") == first_id


async def test_a_file_goes_by_media_upload(stack: Stack) -> None:
    await stack.start()
    await stack.post(stack.wa.text("hi"))
    await stack.wa.wait_for_sent(1)
    assert stack.channel is not None
    message_id = await stack.channel.inner.send_file(Target(USER), "report.pdf", b"%PDF-1.4 fake", "The *report*")
    (document,) = [s for s in stack.wa.sent if s.type == "document"]
    assert document.id == message_id and document.payload["document"]["filename"] == "report.pdf"
    assert document.payload["document"]["caption"] == "The *report*"
    media_id = document.payload["document"]["id"]
    assert stack.wa.uploads[media_id] == ("report.pdf", "application/pdf", b"%PDF-1.4 fake")


# ----------------------------------------------------------------------------- in


async def test_a_voice_note_is_answered_from_its_transcript(stack: Stack) -> None:
    async with FakeAudio() as audio:
        stack.extra_yaml = (f'media: {{transcription: {{enabled: true, base_url: "{audio.base_url}", '
                            "api_key: audio-key}}")
        await stack.start()
        await stack.post(stack.wa.voice(ogg_opus("what time is it in Lisbon?", 3.0)))
        (answer,) = await stack.wa.wait_for_sent(1, timeout=10)
        assert answer.text.split("\n\n")[0] == "echo: what time is it in Lisbon?"
        (heard,) = audio.transcriptions
        assert heard.data == ogg_opus("what time is it in Lisbon?", 3.0)


async def test_a_document_is_fetched_with_the_token_and_read(stack: Stack) -> None:
    await stack.start()
    await stack.post(stack.wa.document(b"hello from a file", "notes.txt", "text/plain", "read this"))
    await stack.wa.wait_for_sent(1, timeout=10)
    saved = list((stack.tmp / "workspaces").glob("*/inbox/notes*.txt"))
    assert len(saved) == 1 and saved[0].read_bytes() == b"hello from a file"
    assert ("GET", f"/download/{next(iter(stack.wa.media))}") in stack.wa.requests


async def test_a_location_comes_as_text(stack: Stack) -> None:
    await stack.start()
    location = {"latitude": 38.72, "longitude": -9.14, "name": "Praça do Comércio", "address": "Lisboa"}
    await stack.post(stack.wa.body(messages=[stack.wa.message("location", location)]))
    (answer,) = await stack.wa.wait_for_sent(1)
    assert answer.text == "echo: 📍 Location: Praça do Comércio, Lisboa (38.72, -9.14)"


# ----------------------------------------------------------------------------- buttons


WRITE = Call("write_file", {"path": "note.txt", "content": "hello"}, id="w1")


async def test_an_approval_is_pressed_on_a_list_and_runs_once(stack: Stack) -> None:
    stack.extra_yaml = "tools: {approval: {write_file: ask}}"
    await stack.start()
    stack.llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved it."))
    await stack.post(stack.wa.text("save hello"))
    question = await stack.wa.wait_for(lambda: next((s for s in stack.wa.sent if s.type == "interactive"), None))
    assert question.payload["interactive"]["type"] == "list"  # three choices, one label over 20 characters
    ids = stack.wa.buttons(question.id)
    assert len(ids) == 3 and "write_file" in question.text
    press = stack.wa.press(question.id, ids[0])
    await stack.post(press)
    await stack.post(press)  # redelivered: one press
    await stack.wa.wait_for(lambda: "Saved it." in stack.wa.texts(), timeout=10)
    written = [p.read_text() for p in (stack.tmp / "workspaces").glob("*/note.txt")]
    outcome = [s.text for s in stack.wa.sent if s.quoted == question.id]
    assert written == ["hello"] and len(outcome) == 1 and "allowed once" in outcome[0]
    await asyncio.sleep(0.5)
    assert len(stack.llm.requests) == 2


# ----------------------------------------------------------------------------- the window


async def remind_outside_the_window(stack: Stack) -> None:
    await stack.post(stack.wa.text("/remind in 2s stretch your legs"))
    await stack.wa.wait_for(lambda: any(t.startswith("I'll remind you") for t in stack.wa.texts()))
    stack.advance(25 * 3600)  # the person last wrote over 24 hours ago when it is due


async def test_a_reminder_outside_the_window_goes_as_the_template(stack: Stack) -> None:
    yaml = stack.channel_yaml().replace("dm_policy: open", "dm_policy: open, templates: {reminder: "
                                        "{name: chatgate_reminder, language: en_US}}")
    stack.channel_yaml = lambda: yaml  # type: ignore[method-assign]
    await stack.start()
    await remind_outside_the_window(stack)
    template = await stack.wa.wait_for(lambda: next((s for s in stack.wa.sent if s.type == "template"), None), 10)
    assert template.payload["template"]["name"] == "chatgate_reminder"
    assert template.payload["template"]["language"] == {"code": "en_US"}
    assert template.text == "⏰ Reminder: stretch your legs"
    await asyncio.sleep(0.5)
    assert [s.type for s in stack.wa.sent] == ["text", "template"]


async def test_a_reminder_outside_the_window_without_a_template_is_given_up_with_the_reason(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await stack.start()
    await remind_outside_the_window(stack)
    await until(lambda: any("giving up" in r.getMessage() for r in caplog.records), timeout=10)
    (line,) = [r.getMessage() for r in caplog.records if "giving up" in r.getMessage()]
    assert "no template is set for a reminder (channels.whatsapp.templates.reminder)" in line
    assert [s.type for s in stack.wa.sent] == ["text"]  # nothing sent that WhatsApp would refuse


async def test_a_131047_status_closes_the_window_and_the_next_goes_as_the_template(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    yaml = stack.channel_yaml().replace("dm_policy: open", "dm_policy: open, templates: {task: chatgate_task}")
    stack.channel_yaml = lambda: yaml  # type: ignore[method-assign]
    await stack.start()
    assert stack.channel is not None
    stack.wa.webhook_url = stack.url
    stack.wa.last_inbound.clear()  # WhatsApp knows nobody wrote lately; this process does not
    sent = await stack.channel.inner.send(Target(USER), "your build is green")
    await until(lambda: any("outside the 24-hour window" in r.getMessage() for r in caplog.records))
    assert any(sent in r.getMessage() for r in caplog.records)
    await stack.channel.inner.send(Target(USER), "and deployed")
    assert [(s.type, s.text) for s in stack.wa.sent] == [("text", "your build is green"), ("template", "and deployed")]


async def answers(stack: Stack) -> dict[str, tuple[int, int]]:
    """The stored answers: id -> (delivered, given up)."""
    assert stack.app is not None
    from bot.store.op import rows

    found = await stack.app.store.read(rows("SELECT id, delivered_at IS NOT NULL, given_up FROM answers"))
    return {ident: (int(delivered), int(given_up)) for ident, delivered, given_up in found}


async def owed_again(stack: Stack, states: list[tuple[int, int]]) -> None:
    """Until the chunks owed again after a report stand at ``states`` (delivered, given up) in the ledger."""
    async with asyncio.timeout(5):
        while [s for i, s in (await answers(stack)).items() if "-again-" in i] != states:
            await asyncio.sleep(0.05)


async def test_a_failure_whatsapp_says_is_temporary_is_owed_again_once_by_the_ledger(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await stack.start()
    await stack.post(stack.wa.text("hi"))
    (answer,) = await stack.wa.wait_for_sent(1)
    failed = stack.wa.failed(answer.id, USER, 131000, "Something went wrong")
    assert await stack.post(failed) == 200  # once the ledger owes it again
    again = (await stack.wa.wait_for_sent(2))[1]
    assert await stack.post(failed) == 200  # Meta posts the status again: the same chunk, owed once
    await asyncio.sleep(0.5)
    assert [s.text for s in stack.wa.sent] == ["echo: hi", "echo: hi"]
    await owed_again(stack, [(1, 0)])  # delivered
    await stack.post(stack.wa.failed(again.id, USER, 131000, "Something went wrong"))  # the resent one fails too
    await until(lambda: any("giving up" in r.getMessage() for r in caplog.records))
    await asyncio.sleep(0.3)
    assert len(stack.wa.sent) == 2  # sent at most twice
    assert any("131000 Something went wrong" in r.getMessage() and "giving up" in r.getMessage()
               for r in caplog.records)


async def test_a_failure_after_a_restart_still_finds_its_answer_in_the_ledger(stack: Stack) -> None:
    await stack.start()
    await stack.post(stack.wa.text("hi"))
    (answer,) = await stack.wa.wait_for_sent(1)
    await stack.stop()
    await stack.start()  # a new process: nothing of the send in memory, the ledger has it
    await stack.post(stack.wa.failed(answer.id, USER, 131016, "Service unavailable"))
    await stack.wa.wait_for_sent(2)
    await stack.stop()
    await stack.start()  # and delivered: not sent a third time at the next start
    await stack.post(stack.wa.failed(answer.id, USER, 131016, "Service unavailable"))
    await asyncio.sleep(0.5)
    assert [s.text for s in stack.wa.sent] == ["echo: hi", "echo: hi"]


async def test_a_failure_that_sending_again_would_not_help_is_given_up_in_the_ledger(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await stack.start()
    await stack.post(stack.wa.text("hi"))
    (answer,) = await stack.wa.wait_for_sent(1)
    failed = stack.wa.failed(answer.id, USER, 131026, "Message undeliverable")
    await stack.post(failed)
    await stack.post(failed)
    await until(lambda: any("giving up" in r.getMessage() for r in caplog.records))
    await asyncio.sleep(0.3)
    (line,) = [r.getMessage() for r in caplog.records if "giving up" in r.getMessage()]
    assert f"to whatsapp:{USER}" in line and "131026 Message undeliverable" in line
    assert len(stack.wa.sent) == 1
    assert {i: s for i, s in (await answers(stack)).items() if "-again-" in i} == {f"{stack_answer(stack)}-again-0":
                                                                                  (1, 1)}  # the dashboard lists it
    assert stack.app is not None
    from bot.dashboard.reads import read_failures

    (listed,) = await stack.app.store.read(read_failures(stack.app.store.engine, 10))
    assert listed.kind == "delivery" and listed.where == f"whatsapp:{USER}"


def stack_answer(stack: Stack) -> str:
    """The id of the one answer to a message."""
    import sqlite3

    with sqlite3.connect(stack.tmp / "chatgate.db") as db:
        (ident,) = [i for (i,) in db.execute("SELECT id FROM answers") if "-again-" not in i]
    return str(ident)


async def test_a_131047_on_a_reminder_comes_back_through_the_ledger_as_its_template(stack: Stack) -> None:
    yaml = stack.channel_yaml().replace("dm_policy: open", "dm_policy: open, templates: {reminder: "
                                        "{name: chatgate_reminder, language: en_US}}")
    stack.channel_yaml = lambda: yaml  # type: ignore[method-assign]
    await stack.start()
    stack.wa.webhook_url = stack.url  # where WhatsApp posts its statuses
    await stack.post(stack.wa.text("/remind in 2s stretch your legs"))
    await stack.wa.wait_for(lambda: any(t.startswith("I'll remind you") for t in stack.wa.texts()))
    stack.wa.last_inbound.clear()  # WhatsApp says the window is closed; this process heard otherwise
    template = await stack.wa.wait_for(lambda: next((s for s in stack.wa.sent if s.type == "template"), None), 10)
    assert template.payload["template"]["name"] == "chatgate_reminder"
    assert template.text == "⏰ Reminder: stretch your legs"
    await asyncio.sleep(0.5)
    assert [s.type for s in stack.wa.sent] == ["text", "text", "template"]


async def test_a_131047_heard_after_a_restart_sends_the_chunk_as_the_template(stack: Stack) -> None:
    yaml = stack.channel_yaml().replace("dm_policy: open", "dm_policy: open, templates: {task: chatgate_task}")
    stack.channel_yaml = lambda: yaml  # type: ignore[method-assign]
    await stack.start()
    await stack.post(stack.wa.text("hi"))
    (answer,) = await stack.wa.wait_for_sent(1)
    await stack.stop()
    await stack.start()  # the store says the person wrote a moment ago; WhatsApp says otherwise, and wins
    await stack.post(stack.wa.failed(answer.id, USER, 131047, "Re-engagement message"))
    await stack.wa.wait_for_sent(2)
    await asyncio.sleep(0.3)
    assert [(s.type, s.text) for s in stack.wa.sent] == [("text", "echo: hi"), ("template", "echo: hi")]
    assert stack.wa.sent[1].payload["template"]["name"] == "chatgate_task"


async def test_a_131047_on_an_answer_without_a_template_is_given_up_with_the_reason(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await stack.start()
    stack.wa.webhook_url = stack.url
    stack.llm.script(Reply.text("late answer", delay=0.3))
    await stack.post(stack.wa.text("hi"))
    stack.wa.last_inbound.clear()  # by the time the answer goes, WhatsApp counts the window closed
    await until(lambda: any("giving up" in r.getMessage() for r in caplog.records))
    (line,) = [r.getMessage() for r in caplog.records if "giving up" in r.getMessage()]
    assert "no template is set for a task (channels.whatsapp.templates.task)" in line
    assert [s.text for s in stack.wa.sent] == ["late answer"]
    await owed_again(stack, [(1, 1)])  # given up (the dashboard lists it)


async def test_a_press_on_a_question_made_before_a_restart_still_counts(stack: Stack) -> None:
    channel, inbox = await stack.start_alone()
    stack.wa.last_inbound[USER] = stack.wa.now()
    question = await channel.ask(Target(USER), "Pick one", [Choice("a", "A"), Choice("b", "B")])
    _, inbox = await stack.start_alone()
    await stack.wa.post(stack.wa.press(question, "b"), url=f"http://127.0.0.1:{stack.alone.port}/whatsapp")
    (press,) = await inbox.wait(1)
    assert (press.text, press.reply_to) == ("b", question)
    assert stack.wa.sent[0].payload["interactive"]["type"] == "button"


async def test_a_reminder_that_may_not_reach_the_person_says_so_when_made_and_in_tasks(stack: Stack) -> None:
    await stack.start()
    await stack.post(stack.wa.text("/remind in 2d renew the passport"))
    made = await stack.wa.wait_for(lambda: next((t for t in stack.wa.texts() if t.startswith("I'll remind")), None))
    assert "⚠ WhatsApp delivers it only within 24 hours of your last message here" in made
    await stack.post(stack.wa.text("/remind in 1h tea"))  # within the window: no warning
    await stack.wa.wait_for(lambda: len(stack.wa.sent) == 2)
    assert "⚠" not in stack.wa.texts()[1]
    await stack.post(stack.wa.text("/tasks"))
    listed = await stack.wa.wait_for(lambda: next((t for t in stack.wa.texts() if "Your jobs" in t), None))
    passport, tea = [line for line in listed.splitlines() if " · reminder · " in line]
    assert "⚠ WhatsApp delivers it only" in passport and "⚠" not in tea
    assert stack.app is not None  # and the operators see it on the dashboard's Operations page
    rows = {r.text: r for r in await stack.app.capabilities["schedules"].operator_jobs().jobs()}
    assert rows["renew the passport"].warning.startswith("WhatsApp delivers it only within 24 hours")
    assert rows["tea"].warning == ""
    from bot.dashboard.pages.layout import Viewer
    from bot.dashboard.pages.operations import jobs_table

    html = str(jobs_table(Viewer("olive", "operator", True, "csrf"), list(rows.values()), True, time.time()))
    assert html.count("⚠ WhatsApp delivers it only") == 1


async def test_after_a_restart_the_window_is_known_from_the_stored_messages(stack: Stack) -> None:
    yaml = stack.channel_yaml().replace("dm_policy: open", "dm_policy: open, templates: {reminder: chatgate_reminder}")
    stack.channel_yaml = lambda: yaml  # type: ignore[method-assign]
    await stack.start()
    await stack.post(stack.wa.text("hi"))
    await stack.wa.wait_for_sent(1)
    await stack.stop()
    await stack.start()  # a new process: it heard nobody, the store did
    assert stack.channel is not None
    reminder = Target(USER, purpose=Purpose.REMINDER)
    await stack.channel.inner.send(reminder, "⏰ Reminder: tea")  # within the 24 hours: as text
    stack.advance(25 * 3600)
    await stack.stop()
    await stack.start()
    assert stack.channel is not None
    await stack.channel.inner.send(reminder, "⏰ Reminder: more tea")  # the person wrote 25 hours ago
    assert [(s.type, s.text) for s in stack.wa.sent] == [("text", "echo: hi"), ("text", "⏰ Reminder: tea"),
                                                       ("template", "⏰ Reminder: more tea")]


async def test_after_a_restart_tasks_and_the_dashboard_know_the_window_from_the_store(stack: Stack) -> None:
    await stack.start()
    await stack.post(stack.wa.text("/remind in 2h tea"))  # within the 24 hours: no warning
    made = await stack.wa.wait_for(lambda: next((t for t in stack.wa.texts() if t.startswith("I'll remind")), None))
    assert "⚠" not in made
    await stack.stop()
    await stack.start()  # a new process, before the person writes again
    assert stack.app is not None
    schedules = stack.app.capabilities["schedules"]
    (tea,) = await schedules.operator_jobs().jobs()
    assert tea.warning == ""  # the dashboard: due before the window the stored message opened closes
    (job,) = await schedules.schedules.store.jobs()
    assert "⚠" not in await schedules.schedules.line(job, "UTC")  # /tasks
