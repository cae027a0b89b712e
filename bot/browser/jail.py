"""Chromium in the exec sandbox's world: how one session's browser is started and ended.

Playwright launches a browser by running an executable with its pipe on descriptors 3 and 4
(``--remote-debugging-pipe``). We give it, as ``executable_path``, a two-line script in a
private folder (0700) that ``exec``s bubblewrap, so the browser Playwright talks to is
Chromium inside the sandbox, and the pipe passes through untouched:

- the world of ``exec`` (``bot.tools.sandbox.bwrap_arguments``): the system read-only, an
  allowlist of ``/etc``, no bot file, config, database or other workspace (the private
  paths covered up), a fresh pid namespace, a private ``/tmp`` of ``tmp_mb`` (Chromium's
  profile and cache live there and vanish with it), a clean environment (``HOME=/tmp``);
  of the person's workspace only ``downloads/`` is there, read-write, where downloads land
  (at its own path: Playwright looks for them there); it is opened with ``O_NOFOLLOW``
  inside the workspace and bound by descriptor (``--bind-fd``, the wrapper reopening the
  bot's descriptor through ``/proc``), so a link swapped in cannot aim it elsewhere;
- no network: a network namespace with loopback only. Chromium's proxy is
  ``127.0.0.1:3128`` there, where ``bot.browser.forward`` (the system's Python, isolated)
  hands each connection to the fence (``bot.browser.fence``) through a Unix socket bound in:
  nothing leaves but what the fence lets through, loopback URLs included (``<-loopback>``);
- the bounds of ``tools.exec.limits``: bubblewrap reports its pid 1 on a FIFO
  (``--info-fd``) and waits on another (``--block-fd``) until it is bounded as a command is
  (``CommandLimits.attach``: the cgroup of processes and memory, the file size). Without a
  memory cgroup the per-process address-space limit is left out (Chromium reserves far more
  address space than it uses) and V8's heap is capped instead (``--max-old-space-size``).

Ending it kills the sandbox's pid 1 (the kernel ends every process in it) and removes the
cgroup and the private folder. ``--die-with-parent`` ends it if Playwright's driver dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.browser.config import BrowserSettings
from bot.browser.fence import FenceProxy
from bot.tools.bounds import CommandLimits, host_cgroups
from bot.tools.sandbox import SYSTEM_DIRS, bwrap_arguments, clean_environment

log = logging.getLogger(__name__)

PROXY_PORT = 3128  # inside the sandbox's own network namespace
INSIDE = "/run/chatgate"  # where the forwarder and the fence's socket are shown
LAUNCH_TIMEOUT = 30.0  # seconds for Chromium to start
CHROMIUM_ETC = ("chromium.d", "chromium")  # Chromium's own settings (policies, default flags): no secret
FORWARDER = Path(__file__).with_name("forward.py")
_ARGS_FD, _INFO_FD, _BLOCK_FD, _DOWNLOADS_FD = 5, 6, 7, 8  # the wrapper's redirections (Playwright's pipe: 3, 4)


def chromium_flags(settings: BrowserSettings) -> list[str]:
    """Chromium's options beside Playwright's own."""
    flags = [f"--proxy-server=http://127.0.0.1:{PROXY_PORT}", "--proxy-bypass-list=<-loopback>",
             "--disable-dev-shm-usage", "--disk-cache-size=33554432", "--no-pings",
             "--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]
    memory = settings.sandbox.limits.memory_mb
    if memory is not None:
        flags.append(f"--js-flags=--max-old-space-size={max(64, memory // 2)}")
    return flags


def sandbox_options(settings: BrowserSettings, folder: Path, downloads: str) -> list[str]:
    """bubblewrap's options (what follows ``--args``): the exec sandbox's world, no network,
    the forwarder, the fence's socket and the downloads folder, ``HOME=/tmp``."""
    world = replace(settings.sandbox, network=False, writable=False)
    also = [p for p in _outside_system((Path(sys.base_prefix), settings.executable.parent))]
    options = bwrap_arguments(folder / "empty", world, info_fd=_INFO_FD, block_fd=_BLOCK_FD, also=also)
    at = options.index("--remount-ro")
    options[at:at] = ["--ro-bind", str(FORWARDER), f"{INSIDE}/forward.py", "--bind", str(folder / "net"),
                      f"{INSIDE}/net", "--bind-fd", str(_DOWNLOADS_FD), downloads]
    for name in CHROMIUM_ETC:  # Debian's launcher script reads its default flags there
        if Path("/etc", name).exists():
            options[at:at] = ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    options += ["--setenv", "HOME", "/tmp"]
    return options


def _outside_system(paths: tuple[Path, ...]) -> list[Path]:
    """Of ``paths``, the folders the sandbox does not show already (a Python or a Chromium
    outside ``/usr``): shown read-only where they are."""
    shown = [Path("/usr"), *(Path(d) for d in SYSTEM_DIRS)]
    found: list[Path] = []
    for path in paths:
        real = Path(os.path.realpath(path))
        if not any(real == top or top in real.parents for top in shown) and real not in found:
            found.append(real)
    return found


def wrapper_script(settings: BrowserSettings, folder: Path, downloads_fd: int) -> str:
    """What Playwright runs as the browser: bubblewrap with its options from a file, the
    forwarder, then Chromium with Playwright's arguments. The downloads folder is the one the
    bot opened (``downloads_fd``), reopened through ``/proc`` before bubblewrap starts."""
    bwrap = shutil.which(settings.sandbox.bwrap) or settings.sandbox.bwrap
    python = os.path.realpath(sys.executable)
    command = [bwrap, "--args", str(_ARGS_FD), "--", python, "-I", "-S", f"{INSIDE}/forward.py", str(PROXY_PORT),
               f"{INSIDE}/net/proxy.sock", str(settings.executable)]
    redirections = (f"{_ARGS_FD}<{shlex.quote(str(folder / 'args'))} {_INFO_FD}>{shlex.quote(str(folder / 'info'))} "
                    f"{_BLOCK_FD}<{shlex.quote(str(folder / 'block'))} "
                    f"{_DOWNLOADS_FD}</proc/{os.getpid()}/fd/{downloads_fd}")
    return f'#!/bin/sh\nexec {" ".join(shlex.quote(c) for c in command)} "$@" {redirections}\n'


@dataclass(slots=True)
class Jail:
    """One browser's sandbox, seen from the host: its private folder, fence and bounds."""

    folder: Path
    fence: FenceProxy
    bounds: CommandLimits | None = None
    pid: int | None = None  # the sandbox's pid 1 on the host
    fds: list[int] = field(default_factory=list)

    def kill(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)  # pid 1 of its namespace: the kernel ends the rest
        if self.bounds is not None:
            self.bounds.kill()

    async def close(self) -> None:
        self.kill()
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()
        try:
            if self.bounds is not None:
                await self.bounds.close()
            await self.fence.close()
        finally:
            await asyncio.to_thread(shutil.rmtree, self.folder, True)


async def launch(playwright: Any, settings: BrowserSettings, downloads_fd: int, downloads: Path,
                 fence: FenceProxy) -> tuple[Any, Jail]:
    """Chromium started in its sandbox (bounded before its first instruction) and Playwright's
    ``Browser`` of it. ``downloads_fd`` is the workspace's ``downloads/`` folder, opened safely."""
    folder = Path(tempfile.mkdtemp(prefix="chatgate-browser-"))
    jail = Jail(folder, fence)
    try:
        (folder / "net").mkdir(mode=0o700)
        (folder / "empty").mkdir(mode=0o700)
        await fence.start(str(folder / "net" / "proxy.sock"))
        os.mkfifo(folder / "info", 0o600)
        os.mkfifo(folder / "block", 0o600)
        info_fd = os.open(folder / "info", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        jail.fds.append(info_fd)
        block_fd = os.open(folder / "block", os.O_RDWR | os.O_CLOEXEC)  # a writer: the wrapper's open never waits
        jail.fds.append(block_fd)
        limits = settings.sandbox.limits
        if host_cgroups().memory is None or not limits.cgroup:  # no RLIMIT_AS for Chromium: V8's cap instead
            limits = replace(limits, memory_mb=None)
        jail.bounds = CommandLimits.open(limits, sandboxed=True)
        options = sandbox_options(settings, folder, str(downloads))
        (folder / "args").write_bytes(b"".join(o.encode("utf-8", "surrogateescape") + b"\0" for o in options))
        wrapper = folder / "chromium"
        wrapper.write_text(wrapper_script(settings, folder, downloads_fd))
        wrapper.chmod(0o700)
        starting = asyncio.ensure_future(playwright.chromium.launch(
            executable_path=str(wrapper), headless=True, args=chromium_flags(settings), downloads_path=str(downloads),
            env=clean_environment("/tmp"), timeout=LAUNCH_TIMEOUT * 1000, chromium_sandbox=False,
            handle_sigint=False, handle_sigterm=False, handle_sighup=False))
        try:
            jail.pid = await _sandbox_pid(info_fd, starting)
            await jail.bounds.attach(jail.pid)
            os.write(block_fd, b"x")  # bounded: let Chromium start
            browser = await starting
        except BaseException:
            starting.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({starting}, timeout=5.0)
            raise
        log.info("browser started in its sandbox (pid %s) for %s", jail.pid, fence.label)
        return browser, jail
    except BaseException:
        await jail.close()
        raise


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _sandbox_pid(fd: int, starting: asyncio.Future[Any]) -> int:
    """The host pid of the sandbox's pid 1, from bubblewrap's ``--info-fd`` report; the launch's
    own error when it fails first (bubblewrap could not build the sandbox)."""
    loop = asyncio.get_running_loop()
    data = b""
    while True:
        ready = loop.create_future()
        loop.add_reader(fd, _wake, ready)
        try:
            await asyncio.wait({ready, starting}, timeout=LAUNCH_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(fd)
        if ready.done():
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                chunk = b"-"
            data += b"" if chunk == b"-" else chunk
            with contextlib.suppress(ValueError, KeyError, TypeError):
                return int(json.loads(data)["child-pid"])
            if chunk == b"" and not starting.done():  # no writer yet (the wrapper has not opened it)
                await asyncio.sleep(0.01)
        if starting.done():
            starting.result()  # raises the launch's error
            raise RuntimeError("the browser started without reporting its sandbox")
        if not ready.done():
            raise TimeoutError("the browser's sandbox did not start")
