"""Questions in the terminal (the port's ``Asks``): the console channel reading a pipe, with a
recording inbox. A question is printed with its keys; while it is open, a line that is a
key is a press, any other line a message."""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator

import pytest

from adapters.console.channel import ConsoleChannel
from bot.channels import Asks, Choice, Target
from tests.fakes.channel import CHOICES, RecordingInbox

ME = Target("alice")


class Terminal:
    def __init__(self) -> None:
        self.reader, self.writer = os.pipe()
        self.screen = io.StringIO()
        self.channel = ConsoleChannel(user="alice", input_fd=self.reader, output=self.screen)
        self.inbox = RecordingInbox()

    def type(self, line: str) -> None:
        os.write(self.writer, line.encode() + b"\n")


@pytest.fixture
async def term() -> AsyncIterator[Terminal]:
    t = Terminal()
    await t.channel.start(t.inbox)
    try:
        yield t
    finally:
        await t.channel.stop()
        os.close(t.reader)
        os.close(t.writer)


async def test_a_question_shows_its_keys_and_a_key_is_a_press(term: Terminal) -> None:
    assert isinstance(term.channel, Asks)
    question = await term.channel.ask(ME, "Run `ls -la`?", CHOICES)
    assert "bot › Run `ls -la`?\n      [y] Allow once  [s] Allow for this session  [a] Always allow  [n] Deny\n" \
        in term.screen.getvalue()
    term.type("S")
    (press,) = await term.inbox.wait(1)
    assert (press.text, press.reply_to, press.sender.id, press.chat_id, press.addressed) == (
        CHOICES[1].id, question, "alice", "alice", True)


async def test_other_lines_stay_messages_and_a_closed_question_takes_no_keys(term: Terminal) -> None:
    question = await term.channel.ask(ME, "Allow?", CHOICES)
    term.type("why do you need that?")
    (msg,) = await term.inbox.wait(1)
    assert (msg.text, msg.reply_to) == ("why do you need that?", None)
    await term.channel.close_question(ME, question, "exec: denied by alice")
    assert term.screen.getvalue().endswith("  exec: denied by alice\n")
    term.type("y")
    _, after = await term.inbox.wait(2)
    assert (after.text, after.reply_to) == ("y", None)


async def test_the_latest_open_question_takes_a_key_and_keyless_choices_are_numbered(term: Terminal) -> None:
    first = await term.channel.ask(ME, "First?", CHOICES)
    second = await term.channel.ask(ME, "Pick one", [Choice("left", "Left"), Choice("right", "Right")])
    assert "[1] Left  [2] Right" in term.screen.getvalue()
    term.type("2")
    term.type("n")
    one, two = await term.inbox.wait(2)
    assert (one.reply_to, one.text, two.reply_to, two.text) == (second, "right", first, CHOICES[3].id)


async def test_the_answer_to_a_press_is_a_line(term: Terminal) -> None:
    await term.channel.ask(ME, "Allow?", CHOICES)
    term.type("a")
    (press,) = await term.inbox.wait(1)
    await term.channel.answer_press(press, "Always allowed for exec ls.")
    await term.channel.answer_press(press)
    assert term.screen.getvalue().endswith("  Always allowed for exec ls.\n")


async def test_two_choices_with_one_key_are_refused(term: Terminal) -> None:
    with pytest.raises(ValueError):
        await term.channel.ask(ME, "?", [Choice("a", "A", "x"), Choice("b", "B", "X")])
