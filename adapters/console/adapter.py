"""The terminal channel: a DM between the local OS user and the assistant.

Lines typed on stdin become inbound messages; streamed text is printed as it arrives.
``/stop`` or Ctrl-C (``interrupt``) cancels the running answer without leaving, Ctrl-D
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
from typing import TextIO

from adapters.base import Handler
from bot.agent.events import EventKind, RunEvent
from bot.messages import ChatType, InboundMessage, OutboundReply, Sender

log = logging.getLogger(__name__)

YOU = "you › "
BOT = "bot › "


class ConsoleAdapter:
    platform = "console"

    def __init__(self, *, user: str | None = None, input_fd: int | None = None, output: TextIO | None = None) -> None:
        self.user = user or getpass.getuser()
        self._fd = sys.stdin.fileno() if input_fd is None else input_fd
        self._out = output or sys.stdout
        self._handle: Handler | None = None
        self._buffer = b""
        self._pending = 0  # lines sent to the gateway and not yet answered
        self._streamed: dict[str, str] = {}  # run id -> text already printed
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = asyncio.Event()

    async def start(self, handle: Handler) -> None:
        self._handle = handle
        asyncio.get_running_loop().add_reader(self._fd, self._readable)
        self._write(f"chatgate – chatting as {self.user}. /stop or Ctrl-C stops an answer, /new starts over, Ctrl-D exits.\n{YOU}")

    async def stop(self) -> None:
        if not self.closed.is_set():
            asyncio.get_running_loop().remove_reader(self._fd)
            self.closed.set()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    async def wait_closed(self) -> None:
        await self.closed.wait()

    def interrupt(self) -> None:
        """Ctrl-C: stop the running answer, or remind how to leave."""
        if self._pending:
            self._submit("/stop")
        else:
            self._write(f"\n(Ctrl-D exits)\n{YOU}")

    async def send(self, reply: OutboundReply) -> str | None:
        shown = self._streamed.pop(reply.run_id, None)
        if shown is None:
            self._write(f"{BOT}{reply.text}\n")
        elif reply.text.startswith(shown):
            self._write(f"{reply.text[len(shown):]}\n")
        else:  # the final answer differs from what streamed (e.g. cleaned up): show it whole
            self._write(f"\n{BOT}{reply.text}\n")
        self._answered()
        return None

    def _answered(self) -> None:
        self._pending = max(0, self._pending - 1)
        if not self._pending:
            self._write(YOU)

    async def show(self, event: RunEvent, inbound: InboundMessage) -> None:
        if event.kind is EventKind.CHUNK:
            if event.run_id not in self._streamed:
                self._streamed[event.run_id] = ""
                self._write(BOT)
            self._streamed[event.run_id] += event.text
            self._write(event.text)
        elif event.kind is EventKind.TOOL_CALL and event.tool is not None:
            if self._streamed.pop(event.run_id, None) is not None:
                self._write("\n")
            self._write(f"  ⚙ {event.tool.name} {_short(event.tool.arguments)}\n")
        elif event.kind is EventKind.COMPLETED and not event.text:  # silent: nothing will be sent
            self._streamed.pop(event.run_id, None)
            self._answered()
        elif event.kind is EventKind.RETRYING and event.retry is not None:
            self._write(f"\n(the model did not answer ({event.retry.reason}); trying again in {event.retry.delay:.0f} s)\n")
        elif event.kind is EventKind.CANCELLED:
            if self._streamed.pop(event.run_id, None) is not None:
                self._write(" [stopped]\n")

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except OSError:  # the terminal went away
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._fd)
            self.closed.set()
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
        if not text.startswith("/"):
            self._pending += 1
        msg = InboundMessage(
            platform=self.platform,
            account="console",
            chat_id=self.user,
            chat_type=ChatType.DM,
            sender=Sender(self.user, self.user, self.user),
            text=text,
            message_id=uuid.uuid4().hex,
        )
        assert self._handle is not None
        task = asyncio.create_task(self._handle(msg), name="console inbound")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()


def _short(arguments: str, limit: int = 80) -> str:
    flat = " ".join(arguments.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
