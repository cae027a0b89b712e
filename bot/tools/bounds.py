"""How much one ``exec`` command may take: processes, memory, file size, ``/tmp`` (``tools.exec.limits``).

A command that goes over a bound fails; the bot, and the other chats' commands, go on.
Each bound is enforced by the kernel:

- ``/tmp``: the sandbox's tmpfs is mounted with bubblewrap's ``--size`` (``bwrap_arguments``);
  a write past it fails with "No space left on device".
- file size: ``RLIMIT_FSIZE``; a process that writes past it gets ``SIGXFSZ``.
- processes and memory: a cgroup of the command's own (``pids.max``; ``memory.max`` or
  v1's ``memory.limit_in_bytes``) when the bot may make one (``find_cgroups``: a cgroup v1
  hierarchy it can write, as root in a VM or a privileged container, or a v2 cgroup that
  systemd delegated to it). The kernel then counts every process and byte of the command,
  ``/tmp`` included, and says when a bound was hit (``pids.events``, the OOM-kill count): a
  fork bomb is stopped within ``WATCH_EVERY``.
- without such a cgroup: ``RLIMIT_AS`` per process for memory, and ``RLIMIT_NPROC`` set on the
  sandbox's pid 1 after bubblewrap made its user namespace, so that the kernel counts the
  sandbox's processes only (set before, it would count every process of the bot's user,
  the bot's own threads included). The kernel never applies ``RLIMIT_NPROC`` to uid 0, and
  bubblewrap maps the caller's uid into the sandbox, so a bot that runs as root without a
  cgroup has no process bound but the timeout (``unenforced`` says so at start-up).
  Unsandboxed (``sandbox: none``) there is no namespace of its own to count in, so the
  process bound needs the cgroup there.

Under bubblewrap the limits are applied while the sandbox waits on ``--block-fd``: bubblewrap
has built it (user namespace, mounts) but not yet started the command, so the command and all
it starts are bounded from its first instruction. Unsandboxed they are applied between fork
and exec (``preexec``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
import os
import resource
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config.tools import ExecLimitsConfig

log = logging.getLogger(__name__)

MB = 1 << 20
WATCH_EVERY = 0.1  # seconds between two looks at the cgroup's counters while a command runs
SETUP_WAIT = 2.0  # seconds to wait for bubblewrap to mount the sandbox's /tmp
REMOVE_WAIT = 0.5  # seconds to wait for a killed command's cgroup to empty before it is removed
_PREFIX = "chatgate-exec"
_serial = itertools.count(1)
_TOKEN = os.urandom(3).hex()  # with the pid: unique even beside another pid namespace's bot


def describe_limits(limits: ExecLimitsConfig) -> str:
    """The bounds of ``tools.exec.limits`` for the model and ``chatgate check``: ``256 processes,
    1024 MB of memory, …`` (a ``None`` bound is left out)."""
    parts = [f"{limits.processes} processes" if limits.processes else None,
             f"{limits.memory_mb} MB of memory" if limits.memory_mb else None,
             f"files up to {limits.file_size_mb} MB" if limits.file_size_mb else None,
             f"/tmp up to {limits.tmp_mb} MB" if limits.tmp_mb else None]
    return ", ".join(p for p in parts if p) or "none"


# -- cgroups ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CgroupRoot:
    """The directories the bot makes a command's cgroup in, per controller (v2: the same one)."""

    pids: Path | None = None
    memory: Path | None = None
    version: int = 1

    def __bool__(self) -> bool:
        return self.pids is not None or self.memory is not None


def find_cgroups(proc_self: Path = Path("/proc/self")) -> CgroupRoot:
    """Where this process may make cgroups for its commands; empty when nowhere.

    v1: the bot's own cgroup in the ``pids`` and ``memory`` hierarchies, if it can make a
    child there. v2: the parent of the bot's cgroup when systemd delegated it (the
    ``trusted.delegate`` or ``user.delegate`` mark, e.g. ``Delegate=yes`` with
    ``DelegateSubgroup=``) and no process lives in it directly."""
    try:
        own = _own_cgroups((proc_self / "cgroup").read_text())
        mounts = _cgroup_mounts((proc_self / "mountinfo").read_text())
    except OSError:
        return CgroupRoot()
    found: dict[str, Path] = {}
    for controller in ("pids", "memory"):
        place = _v1_place(controller, own, mounts)
        if place is not None and _can_make_child(place):
            found[controller] = place
    if found:
        return CgroupRoot(pids=found.get("pids"), memory=found.get("memory"), version=1)
    place = _v2_place(own, mounts)
    if place is None:
        return CgroupRoot()
    try:
        controllers = set((place / "cgroup.controllers").read_text().split())
        wanted = [c for c in ("pids", "memory") if c in controllers]
        if wanted:
            _write(place / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
    except OSError as exc:
        log.info("exec limits: cannot use the delegated cgroup %s: %s", place, exc)
        return CgroupRoot()
    if not wanted or not _can_make_child(place):
        return CgroupRoot()
    return CgroupRoot(pids=place if "pids" in wanted else None,
                      memory=place if "memory" in wanted else None, version=2)


@cache
def host_cgroups() -> CgroupRoot:
    """``find_cgroups()`` for this process, looked up once."""
    found = find_cgroups()
    log.info("exec limits: %s", f"cgroup v{found.version} (pids in {found.pids}, memory in {found.memory})"
             if found else "no cgroup the bot may make; rlimits only")
    return found


def _own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup``: controller (``""`` for v2) -> the cgroup's path."""
    own: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                own[controller] = parts[2]
    return own


def _cgroup_mounts(text: str) -> list[tuple[str, str, str, set[str]]]:
    """``/proc/self/mountinfo``'s cgroup mounts: (fs type, root, mount point, options)."""
    mounts = []
    for line in text.splitlines():
        fields, _, tail = line.partition(" - ")
        fields_, tail_ = fields.split(), tail.split()
        if len(fields_) >= 5 and len(tail_) >= 3 and tail_[0] in ("cgroup", "cgroup2"):
            mounts.append((tail_[0], _unescape(fields_[3]), _unescape(fields_[4]), set(tail_[2].split(","))))
    return mounts


def _unescape(path: str) -> str:
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _inside(mount_root: str, mount_point: str, path: str) -> Path | None:
    root = mount_root.rstrip("/")
    if path != root and not path.startswith(f"{root}/"):
        return None  # the cgroup is outside what this mount shows
    return Path(mount_point) / path[len(root):].lstrip("/")


def _v1_place(controller: str, own: dict[str, str], mounts: list[tuple[str, str, str, set[str]]]) -> Path | None:
    if controller not in own:
        return None
    for kind, root, point, options in mounts:
        if kind == "cgroup" and controller in options:
            place = _inside(root, point, own[controller])
            if place is not None and (place / "cgroup.procs").exists():
                return place
    return None


def _v2_place(own: dict[str, str], mounts: list[tuple[str, str, str, set[str]]]) -> Path | None:
    if "" not in own or own[""] in ("", "/"):
        return None
    for kind, root, point, _ in mounts:
        if kind != "cgroup2":
            continue
        mine = _inside(root, point, own[""])
        if mine is None or mine.parent == Path(point).parent:
            continue
        parent = mine.parent
        try:
            delegated = any(_xattr(parent, name) == b"1" for name in ("trusted.delegate", "user.delegate"))
            empty = not (parent / "cgroup.procs").read_text().strip()
        except OSError:
            continue
        if delegated and empty and os.access(parent / "cgroup.subtree_control", os.W_OK):
            return parent
    return None


def _xattr(path: Path, name: str) -> bytes | None:
    try:
        return os.getxattr(path, name)
    except OSError:
        return None


def _can_make_child(place: Path) -> bool:
    probe = place / f"{_PREFIX}-probe-{os.getpid()}-{next(_serial)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


class CommandCgroup:
    """One command's cgroup: made before it starts, removed once it is over."""

    def __init__(self, dirs: dict[str, Path], version: int) -> None:
        self.dirs = dirs  # controller -> directory (v2: the same directory for both)
        self.version = version

    @classmethod
    def make(cls, root: CgroupRoot, limits: ExecLimitsConfig) -> CommandCgroup | None:
        """A fresh cgroup bounded as ``limits`` say, or ``None`` if no controller is wanted."""
        name = f"{_PREFIX}-{os.getpid()}-{_TOKEN}-{next(_serial)}"
        wanted = {}
        if root.pids is not None and limits.processes is not None:
            wanted["pids"] = root.pids / name
        if root.memory is not None and limits.memory_mb is not None:
            wanted["memory"] = root.memory / name
        if not wanted:
            return None
        made = cls({}, root.version)
        try:
            for controller, path in wanted.items():
                if path not in made.dirs.values():
                    path.mkdir()
                made.dirs[controller] = path
            if "pids" in made.dirs:
                _write(made.dirs["pids"] / "pids.max", limits.processes)
            if "memory" in made.dirs:
                memory = made.dirs["memory"]
                size = (limits.memory_mb or 0) * MB
                if root.version == 1:
                    _write(memory / "memory.limit_in_bytes", size)
                    _write(memory / "memory.memsw.limit_in_bytes", size, missing_ok=True)  # no swap either
                else:
                    _write(memory / "memory.max", size)
                    _write(memory / "memory.swap.max", 0, missing_ok=True)
        except OSError:
            made.remove_now()
            raise
        return made

    def procs_files(self) -> list[Path]:
        return [path / "cgroup.procs" for path in dict.fromkeys(self.dirs.values())]

    def join(self, pid: int) -> None:
        for procs in self.procs_files():
            _write(procs, pid)

    def hit_process_limit(self) -> bool:
        return "pids" in self.dirs and _counter(self.dirs["pids"] / "pids.events", "max") > 0

    def oom_kills(self) -> int:
        if "memory" not in self.dirs:
            return 0
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return _counter(self.dirs["memory"] / name, "oom_kill")

    def kill(self) -> None:
        """SIGKILL every process in it (a ``setsid`` one, or one that left the process group, too)."""
        for procs in self.procs_files():
            try:
                pids = procs.read_text().split()
            except OSError:
                continue
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)

    async def remove(self) -> None:
        """Kill what is left, wait (bounded) until it is empty, and remove it."""
        deadline = time.monotonic() + REMOVE_WAIT
        while True:
            self.kill()
            if self.remove_now():
                return
            if time.monotonic() > deadline:
                log.warning("exec: cgroup %s still busy %g s after the kill; left in place",
                            ", ".join(map(str, self.dirs.values())), REMOVE_WAIT)
                return
            await asyncio.sleep(0.02)

    def remove_now(self) -> bool:
        for path in list(dict.fromkeys(self.dirs.values())):
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    log.warning("exec: cannot remove cgroup %s: %s", path, exc)
                return False
            self.dirs = {c: p for c, p in self.dirs.items() if p != path}
        return True


def _write(path: Path, value: object, *, missing_ok: bool = False) -> None:
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def _counter(path: Path, name: str) -> int:
    """A ``name value`` line of a cgroup events file; 0 when it cannot be read."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


# -- one command ----------------------------------------------------------------------------

@dataclass(slots=True)
class CommandLimits:
    """The bounds of one running command: what was applied and what it ran into.

    Made before the command starts (``open``: its cgroup), applied as it starts (``attach``
    under bubblewrap, ``preexec`` without), watched while it runs (``watch``), read when it
    is over (``verdict``), and closed (``close``: cgroup removed)."""

    limits: ExecLimitsConfig
    sandboxed: bool
    cgroup: CommandCgroup | None = None
    stopped: bool = False  # killed by us for going over the process bound
    _tmp_fd: int | None = None
    _procs_fds: list[int] = field(default_factory=list)

    @classmethod
    def open(cls, limits: ExecLimitsConfig, *, sandboxed: bool) -> CommandLimits:
        root = host_cgroups() if limits.cgroup else CgroupRoot()
        return cls(limits, sandboxed, CommandCgroup.make(root, limits))

    def rlimits(self) -> Iterator[tuple[int, int]]:
        """``(resource, value)`` pairs to set on the command (soft and hard alike)."""
        if self.limits.file_size_mb is not None:
            yield resource.RLIMIT_FSIZE, self.limits.file_size_mb * MB
        if self.limits.memory_mb is not None and not (self.cgroup and "memory" in self.cgroup.dirs):
            yield resource.RLIMIT_AS, self.limits.memory_mb * MB
        if self.limits.processes is not None and self.sandboxed and not (self.cgroup and "pids" in self.cgroup.dirs):
            yield resource.RLIMIT_NPROC, self.limits.processes  # counted in the sandbox's user namespace

    async def attach(self, pid: int) -> None:
        """Bound the sandbox whose pid 1 is ``pid`` (on the host), before it starts the command.

        Raises ``OSError`` if a bound cannot be applied; the caller must not let it run then."""
        for which, value in self.rlimits():
            resource.prlimit(pid, which, (value, value))
        if self.cgroup is not None:
            self.cgroup.join(pid)
        if self.limits.tmp_mb is not None:
            self._tmp_fd = await _sandbox_tmp(pid, self.limits.tmp_mb * MB)

    def preexec_fn(self) -> Callable[[], None] | None:
        """For an unsandboxed spawn: what the child runs between fork and exec, if anything.

        It opens the cgroup's files now, for the child to write to; ``after_spawn`` closes them."""
        pairs = list(self.rlimits())
        if self.cgroup is not None:
            for procs in self.cgroup.procs_files():
                self._procs_fds.append(os.open(procs, os.O_WRONLY | os.O_CLOEXEC))
        fds = tuple(self._procs_fds)
        if not pairs and not fds:
            return None

        def preexec() -> None:
            # in the child, which may have been forked while another thread held a lock (why
            # preexec_fn is "not thread-safe"): so system calls only, nothing computed here
            for fd in fds:
                os.write(fd, b"0")  # 0: the writing process, i.e. this child
            for which, value in pairs:
                resource.setrlimit(which, (value, value))

        return preexec

    def after_spawn(self) -> None:
        for fd in self._procs_fds:
            os.close(fd)
        self._procs_fds.clear()

    async def watch(self) -> None:
        """Return once the command went over the process bound (never without a pids cgroup)."""
        cgroup = self.cgroup
        if cgroup is None or "pids" not in cgroup.dirs:
            await asyncio.Event().wait()  # nothing to watch: until cancelled
            return
        while not cgroup.hit_process_limit():
            await asyncio.sleep(WATCH_EVERY)
        self.stopped = True

    def kill(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill()

    def verdict(self, code: int | None) -> str | None:
        """What the command ran into, in words for the model; ``None`` if no bound was hit."""
        lim = self.limits
        if self.stopped:
            return (f"stopped: the command went over the limit of {lim.processes} processes; "
                    f"everything it started was killed")
        if self.cgroup is not None and self.cgroup.hit_process_limit():  # it ended before ``watch`` saw it
            return f"the command went over the limit of {lim.processes} processes: some could not start"
        if self.cgroup is not None and self.cgroup.oom_kills():
            return f"a process was killed for going over the memory limit ({lim.memory_mb} MB)"
        if lim.file_size_mb is not None and code in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
            return f"a file reached the size limit ({lim.file_size_mb} MB per file)"
        if self._tmp_fd is not None:
            try:
                st = os.fstatvfs(self._tmp_fd)
            except OSError:
                return None
            if st.f_bavail * st.f_frsize < min(MB, st.f_blocks * st.f_frsize // 100):
                return f"/tmp is full (it holds at most {lim.tmp_mb} MB; keep big files in the workspace)"
        return None

    async def close(self) -> None:
        self.after_spawn()
        if self._tmp_fd is not None:
            os.close(self._tmp_fd)  # the last reference to the sandbox's /tmp: its memory is freed
            self._tmp_fd = None
        if self.cgroup is not None:
            await self.cgroup.remove()


async def _sandbox_tmp(pid: int, size: int) -> int | None:
    """An open handle on the sandbox's /tmp, to see after the command whether it filled it.

    bubblewrap reports the sandbox's pid before it has mounted anything: wait (bounded)
    until ``/tmp`` there is the tmpfs of ``size`` bytes. ``None`` if it never shows."""
    path = f"/proc/{pid}/root/tmp"
    deadline = time.monotonic() + SETUP_WAIT
    while time.monotonic() < deadline:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = -1  # not pivoted into the new root yet
        except OSError:
            return None  # gone, or not ours to look at: no report about /tmp then
        if fd >= 0:
            st = os.fstatvfs(fd)
            if st.f_blocks * st.f_frsize == size:
                return fd
            os.close(fd)
        await asyncio.sleep(0.002)
    log.debug("exec: the sandbox's /tmp (pid %d) never showed; no report about it", pid)
    return None


def unenforced(limits: ExecLimitsConfig, *, sandboxed: bool, root: CgroupRoot | None = None) -> list[str]:
    """The bounds this host cannot enforce, in words (for a start-up warning)."""
    if root is None:
        root = host_cgroups() if limits.cgroup else CgroupRoot()
    missing = []
    if limits.processes is not None and root.pids is None and (not sandboxed or os.geteuid() == 0):
        why = "the bot runs as root" if sandboxed else "tools.exec.sandbox is none"
        missing.append(f"tools.exec.limits.processes ({why} and has no cgroup it may make: only the "
                       f"timeout ends a fork bomb)")
    return missing
