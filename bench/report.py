"""What ``python -m bench`` reports: figures beside their goals and the peer's figure, the
machine they were measured on, and ``bench/results.json``."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bench.common import BOT_TREE, table


@dataclass(frozen=True, slots=True)
class Goal:
    op: Literal["<", "<=", ">=", "="]
    limit: float

    def met(self, value: float) -> bool:
        return {"<": value < self.limit, "<=": value <= self.limit, ">=": value >= self.limit,
                "=": value == self.limit}[self.op]


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure. ``value`` None means it could not be measured (see ``note``)."""

    scenario: str
    name: str
    value: float | None
    unit: str = ""  # "" for counts
    goal: Goal | None = None
    peer: str = ""  # the peer's figure, for scale
    note: str = ""

    @property
    def shown(self) -> str:
        return "-" if self.value is None else _with_unit(self.value, self.unit)

    @property
    def verdict(self) -> str:
        if self.goal is None:
            return ""
        if self.value is None:
            return "n/a"
        return "met" if self.goal.met(self.value) else "MISSED"

    @property
    def goal_shown(self) -> str:
        if self.goal is None:
            return ""
        return f"{self.goal.op} {_with_unit(self.goal.limit, self.unit, exact=True)}: {self.verdict}"


def _with_unit(value: float, unit: str, *, exact: bool = False) -> str:
    if exact:  # a goal's limit, as written
        number = f"{value:g}"
    elif abs(value) >= 100 or (not unit and float(value).is_integer()):
        number = f"{value:,.0f}"
    elif abs(value) >= 10:
        number = f"{value:.1f}"
    else:
        number = f"{value:.2f}"
    if not unit:
        return number
    return f"{number}{unit}" if unit == "x" else f"{number} {unit}"


def render(figures: list[Figure]) -> str:
    rows = [[f.scenario, f.name, f.shown, f.goal_shown, f.peer] for f in figures]
    return table(["scenario", "figure", "value", "goal", "peer"], rows, left=2)


def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    ram_kb = next((int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal:")), 0)
    return {"cpu": model, "cores": os.cpu_count(), "ram_gb": round(ram_kb / 1024 / 1024, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git_commit": _git_commit()}


def _git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=BOT_TREE, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=BOT_TREE, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}{' (with uncommitted changes)' if dirty else ''}"


def describe(info: dict[str, Any]) -> str:
    return (f"{info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB RAM; Python {info['python']} on "
            f"{info['platform']}; commit {info['git_commit']}; {info['timestamp']}")


def write_json(path: Path, info: dict[str, Any], figures: list[Figure], how: dict[str, str],
               seconds: dict[str, float], errors: dict[str, str], quick: bool) -> None:
    results = {
        "machine": info, "quick": quick, "how": how, "errors": errors,
        "seconds": {name: round(s, 1) for name, s in seconds.items()},
        "figures": [{**asdict(f), "goal": f.goal_shown.split(":")[0] if f.goal else None,
                     "verdict": f.verdict or None} for f in figures],
    }
    path.write_text(json.dumps(results, indent=2) + "\n")
