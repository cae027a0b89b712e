"""WhatsApp's pure parts: the dialect, the webhook's signature and body, the mapping of what Meta
posts, questions, the window, errors, and the config's keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.whatsapp.config import WhatsAppConfig, check
from adapters.whatsapp.dialect import WHATSAPP, lookalike
from adapters.whatsapp.graph import Refused, failure
from adapters.whatsapp.inbound import parse
from adapters.whatsapp.questions import question_payload
from adapters.whatsapp.webhook import sign, signed, well_formed
from adapters.whatsapp.window import WINDOW, Windows, kind_of, one_line, template_payload
from bot.channels import Choice, Mark
from bot.errors import ConfigError
from bot.messages import AttachmentKind, Purpose, Target
from bot.outbound.markdown import render
from bot.settings import load_config
from tests.fakes.whatsapp_server import FakeWhatsApp
from tests.readback import atoms, plain

# ----------------------------------------------------------------------------- the dialect


@pytest.mark.parametrize(("markdown", "rendered"), [
    ("**bold**, *it*, ~~gone~~ and `code`", "\u200b*bold*\u200b, \u200b_it_\u200b, \u200b~gone~\u200b and "
                                             "\u200b`code`\u200b"),
    ("un**believ**able", "un\u200b*believ*\u200bable"),
    ("```py\nx = `1`\n```", "```\nx = `1`\n```"),
    ("> said\n\n- one\n- two", "> said\n\n• one\n• two"),
    ("[the docs](https://example.org/a) or https://example.org", "the docs (https://example.org/a) or https://example.org"),
    ("# Title", "\u200b*Title*\u200b"),
    ("my_var_name and 2*3 stay", "my_var_name and 2*3 stay"),
    (r"\*not bold\* and \_not italic\_", "\u2217not bold\u2217 and \u02cdnot italic\u02cd"),
    (r"\> not a quote", "\u200b> not a quote"),
])
def test_the_dialect_writes_whatsapp_markup(markdown: str, rendered: str) -> None:
    assert render(markdown, WHATSAPP) == rendered


def test_a_marker_in_text_that_could_open_or_close_becomes_its_lookalike() -> None:
    assert lookalike("*a* _b_ ~c~ `d`") == "\u2217a\u2217 \u02cdb\u02cd \u223cc\u223c \u02cbd\u02cb"
    assert lookalike("snake_case 2*3 a~b") == "snake_case 2*3 a~b"


@given(st.text(alphabet="ab *_~`>\n.", max_size=40))
def test_text_never_reads_back_as_markup(text: str) -> None:
    rendered = "".join(a.raw for a in WHATSAPP.text(text))
    assert not [a for a in atoms(rendered, WHATSAPP) if a.mark is not Mark.TEXT]


# ----------------------------------------------------------------------------- the webhook


def test_a_signature_is_the_hmac_of_the_raw_body() -> None:
    body = b'{"object":"whatsapp_business_account"}'
    good = sign(b"secret", body)
    assert well_formed(good) and signed(b"secret", body, good)
    assert not signed(b"other", body, good) and not signed(b"secret", body + b" ", good)
    assert not well_formed("sha1=" + "0" * 40) and not well_formed(None) and not well_formed("sha256=XYZ")


# ----------------------------------------------------------------------------- what Meta posts


WA = FakeWhatsApp()


def test_messages_map_to_dms_of_the_sender() -> None:
    body = WA.text("hi there", user="491700000001", id="wamid.A", context="wamid.OUT1")
    (msg,) = parse(body, WA.phone_number_id).messages
    assert (msg.platform, msg.chat_id, msg.sender.id, msg.sender.name) == ("whatsapp", "491700000001",
                                                                           "491700000001", "Alice")
    assert (msg.text, msg.message_id, msg.reply_to, msg.addressed) == ("hi there", "wamid.A", "wamid.OUT1", True)
    assert parse(body, "another-number").messages == ()


def test_media_come_as_attachments_by_media_id() -> None:
    (voice,) = parse(WA.voice(b"OggS"), WA.phone_number_id).messages
    (note,) = voice.attachments
    assert note.kind is AttachmentKind.VOICE and note.mime_type == "audio/ogg" and note.name.endswith(".ogg")
    assert note.platform_file_id in WA.media
    (doc,) = parse(WA.document(b"x", "a.pdf", "application/pdf", "see"), WA.phone_number_id).messages
    assert doc.text == "see" and doc.attachments[0].name == "a.pdf"
    assert doc.attachments[0].kind is AttachmentKind.DOCUMENT


def test_contacts_come_as_text_and_reactions_not_at_all() -> None:
    contact = {"name": {"formatted_name": "Ana Lima"}, "phones": [{"phone": "+351 912 345 678"}]}
    body = WA.body(messages=[WA.message("contacts", [contact]),  # type: ignore[arg-type]
                             WA.message("reaction", {"message_id": "wamid.X", "emoji": "👍"})])
    (msg,) = parse(body, WA.phone_number_id).messages
    assert msg.text == "👤 Contact: Ana Lima, +351 912 345 678"


def test_a_failed_status_is_a_failure_with_its_code() -> None:
    (failed,) = parse(WA.failed("wamid.OUT9", "491700000001", 131047, "Re-engagement message"),
                      WA.phone_number_id).failures
    assert (failed.message_id, failed.recipient, failed.code) == ("wamid.OUT9", "491700000001", 131047)


# ----------------------------------------------------------------------------- questions


def test_up_to_three_short_choices_are_buttons_more_a_list() -> None:
    buttons = question_payload("Go?", [Choice("y", "Yes"), Choice("n", "No")])["interactive"]
    assert buttons["type"] == "button" and [b["reply"]["id"] for b in buttons["action"]["buttons"]] == ["y", "n"]
    listed = question_payload("Go?", [Choice(str(i), f"Choice {i}") for i in range(4)])["interactive"]
    assert listed["type"] == "list" and len(listed["action"]["sections"][0]["rows"]) == 4
    long = question_payload("Go?", [Choice("s", "Allow for this session")])["interactive"]
    assert long["type"] == "list"  # a label over 20 characters cannot be a button
    with pytest.raises(ValueError):
        question_payload("Go?", [Choice("x" * 201, "A"), Choice("b", "B"), Choice("c", "C"), Choice("d", "D")])
    with pytest.raises(ValueError):
        question_payload("Go?", [Choice(str(i), "A") for i in range(11)])


# ----------------------------------------------------------------------------- the window


def test_the_window_is_open_24_hours_after_the_person_wrote() -> None:
    now = [1000.0]
    windows = Windows(clock=lambda: now[0])
    assert windows.is_open("1")  # nothing known: tried (a 131047 would close it)
    windows.heard("1", 1000.0)
    now[0] += WINDOW - 1
    assert windows.is_open("1")
    now[0] += 2
    assert not windows.is_open("1")
    windows.heard("1", now[0])
    windows.close("1")
    assert not windows.is_open("1")


def test_what_the_store_recalls_counts_only_when_newer_than_what_was_heard() -> None:
    now = [100_000.0]
    windows = Windows(clock=lambda: now[0])
    assert windows.is_open("1") and not windows.open_as_heard("1")  # unknown: open, but not by a message
    windows.recalled("1", now[0] - WINDOW - 10)  # the store: they last wrote 24 hours ago and more
    assert not windows.is_open("1")
    windows.recalled("1", now[0] - 60)  # another instance heard them a minute ago
    assert windows.is_open("1") and windows.open_as_heard("1")
    windows.close("1")  # a 131047 about a later send
    windows.recalled("1", now[0] - 60)  # the same message again: the closing stands
    assert not windows.is_open("1")
    now[0] += 10
    windows.recalled("1", now[0] - 5)  # they wrote since
    assert windows.is_open("1")


def test_a_closing_stands_against_the_store_after_a_restart() -> None:
    now = [100_000.0]
    windows = Windows(clock=lambda: now[0])  # a new process: it heard nobody
    windows.close("1")  # WhatsApp: 131047, whatever the store holds
    windows.recalled("1", now[0] - 3600)  # the store's last message, which WhatsApp counted as too old
    assert not windows.is_open("1") and windows.ends("1") is None
    windows.recalled("1", now[0] + 5)  # a message after the closing (heard by another instance)
    assert windows.is_open("1")


def test_a_template_carries_the_text_on_one_line() -> None:
    assert kind_of(Purpose.REMINDER) == "reminder"
    assert kind_of(Purpose.TASK) == kind_of(Purpose.ANSWER) == "task"  # a notice, a late answer: not a reminder
    assert kind_of(Target("1").purpose) == "task"  # what the text says does not matter: "⏰ ..." from the model
    assert one_line("a\n\nb\t c      d") == "a b c d" and len(one_line("x" * 5000)) == 1024
    payload = template_payload("chatgate_task", "en", "done\nnow")
    assert payload["template"]["components"][0]["parameters"] == [{"type": "text", "text": "done now"}]


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("code", "http", "permanent", "retry_after"), [
    (131047, 400, True, None), (131026, 400, True, None), (100, 400, True, None),
    (130429, 400, False, 5.0), (131056, 400, False, 5.0), (131000, 500, False, None), (131016, 503, False, None),
])
def test_errors_map_onto_retry_or_give_up(code: int, http: int, permanent: bool, retry_after: float | None) -> None:
    failed = failure(http, {"error": {"code": code, "message": "m"}}, "messages")
    assert (failed.permanent, failed.retry_after) == (permanent, retry_after) and str(code) in str(failed)


def test_a_refused_token_is_refused() -> None:
    assert isinstance(failure(401, {"error": {"code": 190, "message": "expired"}}, "messages"), Refused)


# ----------------------------------------------------------------------------- config


def config(tmp_path: Path, keys: str) -> WhatsAppConfig:
    path = tmp_path / "config.yaml"
    path.write_text(f"agent: {{model: m}}\nproviders: {{openai: {{api_key: k}}}}\nchannels: {{whatsapp: {{{keys}}}}}\n")
    found: WhatsAppConfig = load_config(path, env={}).channels.whatsapp  # type: ignore[attr-defined]
    return found


def test_the_config_takes_the_issues_keys(tmp_path: Path) -> None:
    c = config(tmp_path, 'enabled: true, phone_number_id: 106540352242922, access_token: t, app_secret: s, '
                         'verify_token: v, api_version: v22.0, webhook: {bind: "127.0.0.1:9000", path: /wa}, '
                         'allow_from: ["491701234567"], templates: {reminder: chatgate_reminder, '
                         'task: {name: chatgate_task, language: de}}')
    assert (c.phone_number_id, c.webhook.host, c.webhook.port, c.api_version) == ("106540352242922", "127.0.0.1",
                                                                                    9000, "v22.0")
    assert c.templates.reminder is not None and c.templates.reminder.language == "en"
    assert c.templates.task is not None and c.templates.task.language == "de" and check(c) == []


@pytest.mark.parametrize(("keys", "named"), [
    ('enabled: true, access_token: t, app_secret: s, verify_token: v', "channels.whatsapp.phone_number_id"),
    ('phone_number_id: "+49 170"', "channels.whatsapp.phone_number_id"),
    ('allow_from: ["+491701234567"]', "channels.whatsapp.allow_from"),
    ('webhook: {bind: "8080"}', "channels.whatsapp.webhook.bind"),
    ('api_version: "23"', "channels.whatsapp.api_version"),
])
def test_bad_keys_are_named(tmp_path: Path, keys: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, keys)
    assert named in str(caught.value)


def test_plain_reads_back_what_the_dialect_wrote() -> None:
    assert plain(render("**Hi** _there_, `x`", WHATSAPP), WHATSAPP) == "Hi there, x"
