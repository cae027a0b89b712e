"""Find processes by a unique ``sleep`` argument, from the host's side of any pid namespace.

A sandboxed command's ``echo $$`` is a pid of its own namespace, useless out here; so each
test starts ``sleep <marker>`` with a marker nobody else uses and looks for it in /proc.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from pathlib import Path

_serial = itertools.count(1)


def marker() -> str:
    """A ``sleep`` duration (seconds) no other process uses: 40 to 50 s, so leftovers die soon."""
    return f"{40 + (os.getpid() % 10)}.{next(_serial):04d}{time.monotonic_ns() % 10**6:06d}"


def pids_of(mark: str) -> list[int]:
    """Live processes whose command line is ``sleep <mark>`` (zombies count as dead)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1] == mark.encode() and state not in "ZX":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Running or stopped; a zombie (waiting for init to reap it) counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


async def pids_running(*marks: str, within: float = 3.0) -> None:
    """Wait until every marked sleep runs."""
    deadline = time.monotonic() + within
    while not all(pids_of(m) for m in marks):
        assert time.monotonic() < deadline, f"not started: {[m for m in marks if not pids_of(m)]}"
        await asyncio.sleep(0.02)


async def all_dead(*marks: str, within: float = 1.0) -> bool:
    """True when no marked sleep is left within ``within`` seconds; kills leftovers either way."""
    deadline = time.monotonic() + within
    while any(pids_of(m) for m in marks):
        if time.monotonic() > deadline:
            for m in marks:
                for pid in pids_of(m):
                    os.kill(pid, signal.SIGKILL)
            return False
        await asyncio.sleep(0.02)
    return True
