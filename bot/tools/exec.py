"""The ``exec`` tool: a shell command in the session's workspace (off unless configured).

``/bin/sh -c command`` runs with the workspace as cwd and ``HOME``, stdin from
``/dev/null``, stdout and stderr merged into one pipe (so in order), an environment built
from an allowlist (no keys or tokens of the bot reach it) and its own process group.
Nothing outlives the call: when the shell exits, times out or the task is cancelled
(``/stop``, shutdown, the registry's timeout) the whole group gets SIGKILL, so
``sleep 300 &`` dies with it. Not a sandbox: the command can read what the bot can.

The result is the output, cut to ``MAX_OUTPUT_CHARS`` (head and tail), and a last line
``[exit code N]``. A non-zero exit is a normal result, not an error: the model reads the
output and the code and decides. A timeout is a ``ToolError`` (an error result) that
still carries the output so far.

We read our own ``os.pipe`` rather than ``stdout=PIPE``: on Python 3.11
``Process.wait()`` does not return until every pipe is closed, so a background child
holding stdout would keep us waiting until the timeout.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
import signal
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bot.tools.base import ToolCategory, ToolContext, ToolError, tool

log = logging.getLogger(__name__)

MAX_TIMEOUT = 600.0  # seconds; caps the timeout the model asks for
MAX_OUTPUT_CHARS = 20_000  # head and tail kept, the middle cut
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL on timeout
SETTLE_WAIT = 1.0  # seconds to reap the shell, and again to drain the pipe, after the kill
SHELL = "/bin/sh"
PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")  # copied from our environment when set
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_LOGGED_CHARS = 200
_CHUNK = 65_536


def exec_environment(workspace: Path, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: an allowlist, never a filtered copy, so no secret slips in."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in PASSED_THROUGH if source.get(name)}
    env.setdefault("PATH", _DEFAULT_PATH)
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=str(workspace), TERM="dumb", TMPDIR=tempfile.gettempdir())
    return env


class OutputCapture:
    """Decodes output as it comes (UTF-8, bad bytes replaced) and keeps only head and tail."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self._head_cap = limit // 2
        self._tail_cap = max(1, limit - self._head_cap)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head = ""
        self._tail = ""
        self.total = 0  # characters seen

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        self.total += len(text)
        if len(self._head) < self._head_cap:
            room = self._head_cap - len(self._head)
            self._head, text = self._head + text[:room], text[room:]
        if text:
            self._tail = (self._tail + text)[-self._tail_cap:]

    def text(self) -> str:
        self.feed(b"", final=True)
        cut = self.total - len(self._head) - len(self._tail)
        if not cut:
            return self._head + self._tail
        return f"{self._head}\n[… {cut:,} of {self.total:,} characters cut …]\n{self._tail}"


@tool(category=ToolCategory.EXEC, name="exec")
async def exec_command(ctx: ToolContext, command: str, timeout: int = 120) -> str:
    """Run a shell command (/bin/sh -c) in the workspace; returns stdout and stderr together, then the exit code.

    Args:
        command: The shell command line, e.g. `ls -la` or `python3 script.py`.
        timeout: Seconds before the command is killed (at most 600).
    """
    if not command.strip():
        raise ToolError("exec: the command is empty; give a shell command to run")
    if timeout < 1:
        raise ToolError("exec: timeout must be at least 1 second")
    limit = min(float(timeout), MAX_TIMEOUT)
    workspace = Path(os.path.realpath(ctx.workspace))
    if not workspace.is_dir():
        raise ToolError("exec: the workspace folder does not exist")
    shown = command if len(command) <= _LOGGED_CHARS else f"{command[:_LOGGED_CHARS]}…"
    log.info("exec (timeout %g s) session=%s run=%s: %s", limit, ctx.session_key, ctx.run_id, shown)

    capture = OutputCapture()
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    stream = asyncio.StreamReader()
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    except BaseException:
        pipe.close()
        os.close(write_fd)
        raise
    try:
        proc = await asyncio.create_subprocess_exec(
            SHELL, "-c", command, cwd=workspace, env=exec_environment(workspace),
            stdin=asyncio.subprocess.DEVNULL, stdout=write_fd, stderr=write_fd, start_new_session=True)
    except BaseException as exc:
        transport.close()
        if isinstance(exc, OSError):
            raise ToolError(f"exec: could not start {SHELL}: {exc.strerror or exc}") from None
        raise
    finally:
        os.close(write_fd)  # the children hold their copies; EOF comes when the last one exits

    pump = asyncio.create_task(_pump(stream, capture), name=f"exec-output:{proc.pid}")
    try:
        timed_out = await _wait_or_stop(proc, limit)
    finally:
        # on exit, timeout and cancellation alike: synchronous, so nothing can skip it
        _kill_group(proc.pid, signal.SIGKILL)
        await _settle(proc, pump, transport)

    output = capture.text()
    body = output if not output or output.endswith("\n") else f"{output}\n"
    if timed_out:
        log.warning("exec timed out after %g s session=%s run=%s", limit, ctx.session_key, ctx.run_id)
        raise ToolError(f"{body}[timed out after {limit:g} s; the command was killed]")
    code = proc.returncode
    log.debug("exec exited with %s, %d chars session=%s run=%s", code, capture.total, ctx.session_key, ctx.run_id)
    return f"{body}{_status(code)}"


async def _pump(stream: asyncio.StreamReader, capture: OutputCapture) -> None:
    while chunk := await stream.read(_CHUNK):
        capture.feed(chunk)


async def _wait_or_stop(proc: asyncio.subprocess.Process, limit: float) -> bool:
    """Wait for the shell to exit; ``True`` if it ran out of time (group sent SIGTERM, then SIGKILL)."""
    try:
        async with asyncio.timeout(limit):
            await proc.wait()
        return False
    except TimeoutError:
        pass
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(KILL_GRACE):
            await proc.wait()
    except TimeoutError:
        _kill_group(proc.pid, signal.SIGKILL)
    return True


async def _settle(proc: asyncio.subprocess.Process, pump: asyncio.Task[None],
                  transport: asyncio.BaseTransport) -> None:
    """After the kill: reap the shell, drain what is left in the pipe, close it; each bounded."""
    try:
        try:
            async with asyncio.timeout(SETTLE_WAIT):
                await proc.wait()
        except TimeoutError:
            log.warning("exec: pid %d still not reaped %g s after SIGKILL", proc.pid, SETTLE_WAIT)
        await asyncio.wait({pump}, timeout=SETTLE_WAIT)  # a process that left our group may hold the pipe
    finally:
        pump.cancel()
        transport.close()


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def _status(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"[killed by signal {signal.Signals(-code).name}]"
        except ValueError:
            return f"[killed by signal {-code}]"
    return f"[exit code {code}]"
