"""The ``exec`` tool: a shell command in the session's workspace (off unless configured).

``make_exec_tool(settings)`` builds it for ``tools.exec``: by default each command runs in a
bubblewrap sandbox (see ``bot.tools.sandbox``: the workspace at ``/workspace`` is the only
writable path, a private ``/tmp``, a fresh pid namespace, no network, a clean environment)
and only for owners (``owners_only``: the context says whether the sender is one). With
``sandbox: none`` it is ``/bin/sh -c command`` on the host with the workspace as cwd and an
environment built from an allowlist: not a sandbox, the command can read what the bot can.

Either way the command is bounded (``tools.exec.limits``, see ``bot.tools.bounds``): a fork
bomb, a memory hog or a ``dd`` into ``/tmp`` fails the command, not the bot, and the result's
last line says which bound it hit. Stdin is ``/dev/null``, stdout and stderr are merged into
one pipe (so in order) and nothing outlives the call: when the shell exits, times out or the task is cancelled
(``/stop``, shutdown, the registry's timeout) everything is killed with SIGKILL: under
bubblewrap the sandbox's pid 1 (the kernel then kills the whole pid namespace, ``setsid``
children included), without it the shell's process group.

The result is the output, cut to ``MAX_OUTPUT_CHARS`` (head and tail), and a last line
``[exit code N]`` (``[exit code 1; /tmp is full (…)]`` when a bound explains it). A non-zero
exit is a normal result, not an error: the model reads the output and the code and decides.
A timeout, and a command stopped for going over the process bound, is a ``ToolError`` (an
error result) that still carries the output so far. Command lines are logged cut and redacted.

We read our own ``os.pipe`` rather than ``stdout=PIPE``: on Python 3.11
``Process.wait()`` does not return until every pipe is closed, so a background child
holding stdout would keep us waiting until the timeout.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import os
import signal
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.bounds import CommandLimits, describe_limits
from bot.tools.sandbox import SANDBOX_WORKSPACE, ExecSettings, clean_environment, sandbox_command
from bot.tracing import Redactor
from bot.workspace import GROUP_PROTECTED, GROUP_PROTECTED_FOLDERS, read_only_for

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
_BWRAP_FAILED = 1  # bwrap's exit code when it cannot set the sandbox up
_REDACT = Redactor()  # known key shapes; the logging filter adds the configured secrets


def exec_environment(workspace: Path) -> dict[str, str]:
    """The child's environment: an allowlist, never a filtered copy, so no secret slips in."""
    env = {name: os.environ[name] for name in PASSED_THROUGH if os.environ.get(name)}
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


_DESCRIPTION = """Run a shell command (/bin/sh -c) in the workspace; returns stdout and stderr together,
    then the exit code.{where}

    Args:
        command: The shell command line, e.g. `ls -la` or `python3 script.py`.
        timeout: Seconds before the command is killed (at most 600).
    """
_SANDBOXED = (" It runs in a sandbox: the workspace is mounted at /workspace (the current folder) and is "
              "the only place that keeps files; /tmp is emptied after each command; {network}. "
              "Limits: {limits}.")


def make_exec_tool(settings: ExecSettings) -> Tool:
    """The ``exec`` tool for these settings (``tools.exec``)."""

    async def exec(ctx: ToolContext, command: str, timeout: int = 120) -> str:  # noqa: A001 - the tool's name
        if settings.owners_only and not ctx.sender_is_owner:
            raise ToolError("exec: only the bot's owners may run commands (tools.exec.owners_only); "
                            "say so to the user instead of trying another way")
        return await run_command(ctx, command, timeout, settings)

    network = "the network is reachable" if settings.network else "there is no network"
    sandboxed = settings.sandbox == "bwrap"
    where = _SANDBOXED.format(network=network, limits=describe_limits(settings.limits)) if sandboxed else ""
    exec.__doc__ = _DESCRIPTION.format(where=where)
    return tool(category=ToolCategory.EXEC, name="exec")(exec)


async def run_command(ctx: ToolContext, command: str, timeout: int, settings: ExecSettings) -> str:
    """Run ``command`` for ``ctx`` as the settings say; the tool's result text."""
    if not command.strip():
        raise ToolError("exec: the command is empty; give a shell command to run")
    if timeout < 1:
        raise ToolError("exec: timeout must be at least 1 second")
    limit = min(float(timeout), MAX_TIMEOUT)
    workspace = Path(os.path.realpath(ctx.workspace))
    if not workspace.is_dir():
        raise ToolError("exec: the workspace folder does not exist")
    sandboxed = settings.sandbox == "bwrap"
    shown = _REDACT(command if len(command) <= _LOGGED_CHARS else f"{command[:_LOGGED_CHARS]}…")
    log.info("exec (%s, timeout %g s) session=%s run=%s: %s", "sandboxed" if sandboxed else "unsandboxed",
             limit, ctx.session_key, ctx.run_id, shown)

    try:
        bounds = CommandLimits.open(settings.limits, sandboxed=sandboxed)
    except OSError as exc:
        log.error("exec: cannot make the command's cgroup session=%s run=%s: %s", ctx.session_key, ctx.run_id, exc)
        raise ToolError("exec: the command's limits could not be set up; the bot's owner must check "
                        "tools.exec.limits") from None
    try:
        end = await _execute(ctx, command, limit, settings, workspace, bounds)
    finally:
        await bounds.close()
    output, code, note = end.output, end.code, end.note
    body = output if not output or output.endswith("\n") else f"{output}\n"
    if note is not None:
        log.info("exec hit a limit session=%s run=%s: %s", ctx.session_key, ctx.run_id, note)
    if end.timed_out:
        log.warning("exec timed out after %g s session=%s run=%s", limit, ctx.session_key, ctx.run_id)
        raise ToolError(f"{body}[timed out after {limit:g} s; the command was killed{f'; {note}' if note else ''}]")
    if end.sandbox_failed:
        log.error("exec: bubblewrap could not build the sandbox session=%s run=%s: %s", ctx.session_key,
                  ctx.run_id, output.strip()[:300])
        raise ToolError("exec: the sandbox could not start (bubblewrap failed); the bot's owner must check "
                        "tools.exec.sandbox")
    if end.stopped:
        raise ToolError(f"{body}[{note}]")
    log.debug("exec exited with %s, %d chars session=%s run=%s", code, len(output), ctx.session_key, ctx.run_id)
    return f"{body}{_status(code, note)}"


@dataclass(frozen=True, slots=True)
class Finished:
    """How a command ended: its output (head and tail), exit code (negative: killed by that
    signal), and what else explains it."""

    output: str
    code: int | None
    timed_out: bool
    note: str | None  # the bound it hit
    sandbox_failed: bool  # bubblewrap could not build the sandbox
    stopped: bool  # stopped for going over a bound


async def run_shell(ctx: ToolContext, command: str, limit: float, settings: ExecSettings, *,
                    stdin: bytes | None = None) -> Finished:
    """``command`` run as ``exec`` runs it (sandboxed, bounded) with ``stdin``, for hooks: how it
    ended, nothing raised for its exit. ``ToolError`` when it could not be started at all."""
    workspace = Path(os.path.realpath(ctx.workspace))
    try:
        bounds = CommandLimits.open(settings.limits, sandboxed=settings.sandbox == "bwrap")
    except OSError as exc:
        raise ToolError(f"the command's limits could not be set up: {exc}") from None
    try:
        return await _execute(ctx, command, limit, settings, workspace, bounds, stdin)
    finally:
        await bounds.close()


async def _execute(ctx: ToolContext, command: str, limit: float, settings: ExecSettings, workspace: Path,
                   bounds: CommandLimits, stdin: bytes | None = None) -> Finished:
    sandboxed = bounds.sandboxed
    capture = OutputCapture()
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    info_read, info_write = os.pipe() if sandboxed else (-1, -1)
    block_read, block_write = os.pipe() if sandboxed else (-1, -1)  # the sandbox waits on it, built
    args_fd: int | None = None
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    stream = asyncio.StreamReader()
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    except BaseException:
        pipe.close()
        _close(write_fd, info_read, info_write, block_read, block_write)
        raise
    protected: list[tuple[int, str]] = []
    try:
        preexec = None
        if sandboxed:
            protected = _protected_files(ctx, workspace) if settings.writable else []  # all read-only then
            argv, args_fd = sandbox_command(workspace, settings, [SHELL, "-c", command], info_fd=info_write,
                                            block_fd=block_read, read_only=protected)
            keep = (info_write, block_read, *(fd for fd, _ in protected), *(() if args_fd is None else (args_fd,)))
            env, cwd = clean_environment(SANDBOX_WORKSPACE, os.environ.get("LANG")), "/"
        else:
            argv, env, cwd, keep = [SHELL, "-c", command], exec_environment(workspace), str(workspace), ()
            preexec = bounds.preexec_fn()
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=write_fd, stderr=write_fd,
            start_new_session=True, pass_fds=keep, preexec_fn=preexec)
    except BaseException as exc:
        transport.close()
        _close(info_read, block_write)
        if isinstance(exc, OSError):
            what = settings.bwrap if sandboxed else SHELL
            raise ToolError(f"exec: could not start {what}: {exc.strerror or exc}") from None
        if isinstance(exc, subprocess.SubprocessError):  # the child could not apply the limits
            log.error("exec: cannot bound the command session=%s run=%s: %s", ctx.session_key, ctx.run_id, exc)
            raise ToolError("exec: the command's limits could not be applied, so it was not run; the bot's "
                            "owner must check tools.exec.limits") from None
        raise
    finally:
        bounds.after_spawn()
        _close(write_fd, info_write, block_read, -1 if args_fd is None else args_fd,  # the child holds its copies
               *(fd for fd, _ in protected))

    sandbox = _Sandbox(proc.pid, info_read if sandboxed else None, block_write if sandboxed else None)
    pump = asyncio.create_task(_pump(stream, capture), name=f"exec-output:{proc.pid}")
    feed = asyncio.create_task(_feed(proc, stdin), name=f"exec-input:{proc.pid}") if stdin is not None else None
    try:
        timed_out = await _wait_or_stop(proc, limit, sandbox, bounds)
    finally:
        if feed is not None:
            feed.cancel()
        # on exit, timeout and cancellation alike: synchronous, so nothing can skip it
        sandbox.kill(signal.SIGKILL)
        bounds.kill()
        sandbox.close()
        try:
            await _settle(proc, pump, transport)
        finally:
            sandbox.unblock()  # only now: a sandbox still waiting would start its command on EOF

    output = capture.text()
    code = proc.returncode
    if sandboxed and code is not None and 128 < code < 128 + 65:
        code = 128 - code  # bwrap reports a child killed by signal N as 128+N, as shells do
    return Finished(output, code, timed_out, bounds.verdict(code),
                    sandboxed and code == _BWRAP_FAILED and sandbox.child_pid is None, bounds.stopped)


def _protected_files(ctx: ToolContext, workspace: Path) -> list[tuple[int, str]]:
    """The group's prompt files and its ``skills/`` folder that this sender may not change (see
    ``read_only_for``), each as an ``O_PATH`` descriptor opened with ``O_NOFOLLOW`` through the
    workspace's own, to be bound read-only by descriptor: what is bound is the regular file or
    folder that was checked, never where a link swapped in meanwhile would lead. Links (which a
    group's prompt and skills do not follow) and missing files are left out; a missing
    ``skills/`` is made (empty), so that no command of a member can make one of its own. The
    caller closes the descriptors."""
    if not any(read_only_for(name, chat_type=ctx.chat_type, sender_is_owner=ctx.sender_is_owner)
               for name in (*GROUP_PROTECTED, *GROUP_PROTECTED_FOLDERS)):
        return []
    found: list[tuple[int, str]] = []
    root = os.open(os.path.realpath(workspace), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for name in GROUP_PROTECTED_FOLDERS:
            with contextlib.suppress(OSError):  # there already (or a link, left out below)
                os.mkdir(name, 0o700, dir_fd=root)
        for name, wanted in (*((n, stat.S_ISREG) for n in GROUP_PROTECTED),
                             *((n, stat.S_ISDIR) for n in GROUP_PROTECTED_FOLDERS)):
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
            except OSError:
                continue
            if wanted(os.fstat(fd).st_mode):
                found.append((fd, name))
            else:
                os.close(fd)
    finally:
        os.close(root)
    return found


class _Sandbox:
    """Kills what the command started: the pid namespace's init under bwrap, the process group too.

    Under bwrap it also starts the command: the sandbox waits, built, on ``--block-fd`` until
    ``release`` has bounded it."""

    def __init__(self, pid: int, info_fd: int | None, block_fd: int | None) -> None:
        self.pid = pid
        self.child_pid: int | None = None
        self._info_fd = info_fd
        self._info = b""
        self._info_ended = False
        self._block_fd = block_fd
        if info_fd is not None:
            os.set_blocking(info_fd, False)

    def poll(self) -> None:
        """Read bwrap's report (non-blocking) to learn the host pid of the sandbox's pid 1."""
        if self._info_fd is None or self.child_pid is not None:
            return
        try:
            while chunk := os.read(self._info_fd, 4096):
                self._info += chunk
            self._info_ended = True
        except BlockingIOError:
            pass
        except OSError:
            self._info_ended = True
            return
        try:
            self.child_pid = int(json.loads(self._info)["child-pid"])
        except (ValueError, KeyError, TypeError):
            pass  # not complete yet

    async def release(self, bounds: CommandLimits) -> None:
        """Wait for bwrap's report, bound the sandbox's pid 1, then let it start the command.

        If bwrap ends without a report, its exit code tells why; if a bound cannot be applied
        the command never starts (``ToolError``)."""
        loop = asyncio.get_running_loop()
        while True:
            self.poll()
            if self.child_pid is not None or self._info_fd is None or self._info_ended:
                break
            ready = loop.create_future()
            loop.add_reader(self._info_fd, _wake, ready)
            try:
                await ready
            finally:
                loop.remove_reader(self._info_fd)
        if self.child_pid is None or self._block_fd is None:
            return
        try:
            await bounds.attach(self.child_pid)
        except OSError as exc:
            if isinstance(exc, ProcessLookupError):
                return  # bwrap's pid 1 is gone already: its exit code tells
            log.error("exec: cannot bound the sandbox (pid %d): %s", self.child_pid, exc)
            raise ToolError("exec: the command's limits could not be applied, so it was not run; the bot's "
                            "owner must check tools.exec.limits") from None
        os.write(self._block_fd, b"x")

    def unblock(self) -> None:
        if self._block_fd is not None:
            _close(self._block_fd)
            self._block_fd = None

    def kill(self, sig: signal.Signals) -> None:
        self.poll()
        if self.child_pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.child_pid, signal.SIGKILL)  # pid 1 of the namespace: the kernel kills the rest
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
            os.killpg(self.pid, sig)  # bwrap itself (or the shell, unsandboxed) and its group

    def close(self) -> None:
        if self._info_fd is not None:
            _close(self._info_fd)
            self._info_fd = None


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    """Write ``data`` to the command's stdin and close it (a command that stops reading is fine)."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()


async def _pump(stream: asyncio.StreamReader, capture: OutputCapture) -> None:
    while chunk := await stream.read(_CHUNK):
        capture.feed(chunk)


async def _wait_or_stop(proc: asyncio.subprocess.Process, limit: float, sandbox: _Sandbox,
                        bounds: CommandLimits) -> bool:
    """Start the sandboxed command once bounded, wait for it to exit or go over the process
    bound (``bounds.stopped``; the caller kills it); ``True`` if it ran out of time (SIGTERM,
    then SIGKILL).

    A sandbox gets no grace: the namespace's pid 1 only dies of SIGKILL."""
    try:
        async with asyncio.timeout(limit):
            await sandbox.release(bounds)
            exited = asyncio.ensure_future(proc.wait())
            watch = asyncio.ensure_future(bounds.watch())
            try:
                await asyncio.wait({exited, watch}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                exited.cancel()
                watch.cancel()
        return False
    except TimeoutError:
        pass
    sandbox.kill(signal.SIGTERM)
    try:
        async with asyncio.timeout(KILL_GRACE):
            await proc.wait()
    except TimeoutError:
        sandbox.kill(signal.SIGKILL)
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


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _status(code: int | None, note: str | None) -> str:
    """``[exit code N]`` or ``[killed by signal NAME]``, with what explains it when known."""
    if code is not None and code < 0:
        try:
            status = f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            status = f"killed by signal {-code}"
    else:
        status = f"exit code {code}"
    return f"[{status}; {note}]" if note else f"[{status}]"
