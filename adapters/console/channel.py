"""The terminal channel: a DM between the local OS user and the assistant.

Lines typed on stdin become inbound messages; streamed text is printed as it arrives
(the channel ``Streams``), tool calls as one line each (it ``Notes``). A question (it
``Asks``) is printed with its choices' keys (``[y] Allow once  [n] Deny``); while it is
open, a line that is one of its keys is a press on that choice, other lines stay messages.
``/stop`` or Ctrl-C (it ``Interrupts``) cancels the running answer without leaving, Ctrl-D
(end of input) closes the channel. Reading uses the event loop's reader on the file
descriptor, never a thread and never O_NONBLOCK on the shared terminal.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import os
import sys
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import TextIO

from adapters.console.dialect import CONSOLE, SHAPE
from adapters.console.inbound import PLATFORM, press_of, to_inbound
from bot.channels import Choice, Dialect, Inbox, Lifecycle, SendFailed, Status, Streaming, Target
from bot.messages import Attachment, InboundMessage

log = logging.getLogger(__name__)

YOU = "you › "
BOT = "bot › "


class ConsoleChannel:
    name = PLATFORM
    dialect: Dialect = CONSOLE
    shape = SHAPE
    streaming: Streaming = "native"

    def __init__(self, *, user: str | None = None, input_fd: int | None = None, output: TextIO | None = None) -> None:
        self.user = user or getpass.getuser()
        self._fd = sys.stdin.fileno() if input_fd is None else input_fd
        self._out = output or sys.stdout
        self._inbox: Inbox | None = None
        self._buffer = b""
        self._pending = 0  # lines sent to the gateway and not yet answered
        self._mid_line = False  # a stream was printed without its line end
        self._reading = False
        self._questions: OrderedDict[str, dict[str, str]] = OrderedDict()  # open ones: id -> {key: choice id}
        self._life = Lifecycle()

    async def start(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._life.open()
        asyncio.get_running_loop().add_reader(self._fd, self._readable)
        self._reading = True
        self._write(f"chatgate – chatting as {self.user}. /stop or Ctrl-C stops an answer, /new starts over, "
                    f"Ctrl-D exits.\n{YOU}")

    async def stop(self) -> None:
        self._stop_reading()
        self._life.close()
        await self._life.stop_tasks()

    async def wait_closed(self) -> None:
        await self._life.wait()

    def _stop_reading(self) -> None:
        if self._reading:
            asyncio.get_running_loop().remove_reader(self._fd)
            self._reading = False

    def interrupt(self) -> None:
        """Ctrl-C: stop the running answer, or remind how to leave."""
        if self._pending:
            self._submit("/stop")
        else:
            self._write(f"\n(Ctrl-D exits)\n{YOU}")

    async def send(self, to: Target, text: str) -> str:
        self._write(f"{self._line_end()}{BOT}{text}\n")
        self._answered()
        return uuid.uuid4().hex

    async def edit(self, to: Target, message_id: str, text: str) -> None:
        """The answer replaces what streamed: it is already on the screen."""
        self._write(self._line_end() or "\n")
        self._answered()

    async def send_file(self, to: Target, name: str, data: bytes, caption: str) -> str:
        try:
            body = data.decode()
        except UnicodeDecodeError:  # a voice note, an image: not for a terminal to print
            body = f"[{name}: {len(data):,} bytes]"
        return await self.send(to, f"{caption}\n{body}".strip())

    async def status(self, to: Target, status: Status) -> None:
        if status is Status.SILENT:  # nothing will be sent
            self._answered()

    async def fetch(self, attachment: Attachment, limit: int) -> bytes:
        raise SendFailed("the terminal sends no files", permanent=True)

    async def stream(self, to: Target) -> _Stream:
        return _Stream(self)

    async def note(self, to: Target, text: str) -> None:
        """A line about the run (a tool call, a retry), between the streamed text."""
        self._write(f"{self._line_end()}  {text}\n")

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        """The question and its choices, each behind its key (its number when it has none)."""
        keys = {(c.key or str(n)).lower(): c for n, c in enumerate(choices, 1)}
        if len(keys) != len(choices):
            raise ValueError(f"two choices share a key: {[c.key for c in choices]}")
        question = uuid.uuid4().hex
        self._questions[question] = {key: c.id for key, c in keys.items()}
        shown = "  ".join(f"[{key}] {c.label}" for key, c in keys.items())
        self._write(f"{self._line_end()}{BOT}{text}\n      {shown}\n")
        return question

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        if text:
            self._write(f"{self._line_end()}  {text}\n")

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        """Its keys are plain text again; the outcome is printed."""
        self._questions.pop(question_id, None)
        self._write(f"{self._line_end()}  {text}\n")

    def _line_end(self) -> str:
        if self._mid_line:
            self._mid_line = False
            return "\n"
        return ""

    def _answered(self) -> None:
        self._pending = max(0, self._pending - 1)
        if not self._pending:
            self._write(YOU)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except OSError:  # the terminal went away
            data = b""
        if not data:  # end of input (Ctrl-D): the channel ends
            self._stop_reading()
            self._life.close()
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").strip()
            if line:
                self._submit(line)
            elif not self._pending:
                self._write(YOU)

    def _submit(self, text: str) -> None:
        assert self._inbox is not None
        press = self._press(text)
        if press is not None:
            self._life.spawn(self._inbox(press), "console press")
            return
        if not text.startswith("/"):
            self._pending += 1
        self._life.spawn(self._inbox(to_inbound(self.user, text)), "console inbound")

    def _press(self, line: str) -> InboundMessage | None:
        """A press when ``line`` is a key of an open question (the latest that has it)."""
        key = line.lower()
        for question, choices in reversed(self._questions.items()):
            if key in choices:
                return press_of(self.user, question, choices[key])
        return None

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()


class _Stream:
    """The native stream of one answer: deltas printed as they come."""

    def __init__(self, console: ConsoleChannel) -> None:
        self._console = console
        self._started = False

    async def append(self, text: str) -> None:
        if not self._started:
            self._started = True
            self._console._write(f"{self._console._line_end()}{BOT}")
        self._console._write(text)
        self._console._mid_line = True

    async def close(self) -> str | None:
        return "stream" if self._started else None
