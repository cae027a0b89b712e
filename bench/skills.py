"""Agent Skills on the hot path: what ``Skills.offer`` (asked once per run) costs.

- none: no shared folder and no workspace ``skills/`` (the default install): the time per
  offer and the stat calls it makes (goal: at most one per run);
- some: 12 shared skills and 3 of the workspace's own (listed), unchanged: the time per offer
  (stamp checks and a memo lookup) and its stat calls; many: 40 shared (search mode);
- changed: a workspace skill edited before every offer: a rescan of that folder each time;
- start: scanning 100 shared skills when the app starts.

    python -m bench.skills [--offers 20000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bot.agent.guard import GuardMode
from bot.conversation import Conversation
from bot.skills import SharedSkills, Skills, WorkspaceSkills
from bot.tools.base import ToolContext


def write_skill(folder: Path, name: str) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Does {name} things, well.\n---\n"
                                            "Step one.\n" * 20)


@contextmanager
def counting_stats() -> Iterator[list[int]]:
    """Count ``os.stat``/``os.lstat`` calls made while inside (the skills' only per-run I/O)."""
    count = [0]
    real_stat, real_lstat = os.stat, os.lstat

    def stat(*args: Any, **kw: Any) -> os.stat_result:
        count[0] += 1
        return real_stat(*args, **kw)

    def lstat(*args: Any, **kw: Any) -> os.stat_result:
        count[0] += 1
        return real_lstat(*args, **kw)

    setattr(os, "stat", stat)
    setattr(os, "lstat", lstat)
    try:
        yield count
    finally:
        setattr(os, "stat", real_stat)
        setattr(os, "lstat", real_lstat)


def per_call_us(call: Callable[[], object], n: int) -> tuple[float, float]:
    """(median, p99) microseconds per call, over batches of 100."""
    batches = []
    for _ in range(max(1, n // 100)):
        started = time.perf_counter_ns()
        for _ in range(100):
            call()
        batches.append((time.perf_counter_ns() - started) / 100 / 1000)
    batches.sort()
    return statistics.median(batches), batches[int(len(batches) * 0.99) - 1 if len(batches) > 1 else 0]


def scenario(root: Path, shared: int, own: int, offers: int, *, change: bool = False) -> dict[str, float]:
    data, ws = root / "data" / "skills", root / "ws" / "test-u1"
    ws.mkdir(parents=True)
    for n in range(shared):
        write_skill(data, f"shared-{n}")
    for n in range(own):
        write_skill(ws / "skills", f"own-{n}")
    clock = [0.0]
    skills = Skills(SharedSkills([data], GuardMode.WARN, clock=lambda: clock[0]), WorkspaceSkills(GuardMode.WARN),
                    guard=GuardMode.WARN)
    ctx = ToolContext(ws, Conversation.of_key("agent:main:test:dm:u1"), "run", "main", "u1")
    skill_md = ws / "skills" / "own-0" / "SKILL.md"
    stamp = [0]

    def offer() -> object:
        clock[0] += 0.01  # a hundred runs a second: the shared folders are checked once a second
        if change:
            stamp[0] += 1
            os.utime(skill_md, ns=(stamp[0], stamp[0]))
        return skills.offer(ctx)

    offer()
    with counting_stats() as stats:
        for _ in range(1000):
            offer()
    median, p99 = per_call_us(offer, offers)
    return {"median_us": median, "p99_us": p99, "stats_per_offer": stats[0] / 1000,
            "section_chars": len(skills.offer(ctx).prompt)}


def start(root: Path, count: int) -> float:
    data = root / "data" / "skills"
    for n in range(count):
        write_skill(data, f"skill-{n}")
    started = time.perf_counter()
    SharedSkills([data], GuardMode.WARN)
    return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.skills", description=__doc__.split("\n\n")[0])
    parser.add_argument("--offers", type=int, default=20000)
    args = parser.parse_args(argv)
    rows = []
    for name, shared, own, change in (("none", 0, 0, False), ("some", 12, 3, False), ("many", 40, 3, False), ("changed", 12, 3, True)):
        with tempfile.TemporaryDirectory() as tmp:
            figures = scenario(Path(tmp), shared, own, args.offers if not change else args.offers // 10,
                               change=change)
        rows.append((name, figures))
    print(f"{'scenario':<10}{'median':>10}{'p99':>10}{'stats/run':>11}{'section':>10}")
    for name, f in rows:
        print(f"{name:<10}{f['median_us']:>8.1f}µs{f['p99_us']:>8.1f}µs{f['stats_per_offer']:>11.2f}"
              f"{int(f['section_chars']):>9}c")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"start: scanning 100 shared skills took {start(Path(tmp), 100):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
