"""What the exec sandbox costs per call: ``true`` through the exec tool, with and without it.

The tool runs as the agent runs it (``ToolRegistry.execute`` with a tool context), so each
figure includes the pipe, the process start, the wait and the clean-up; the difference
between the two rows is what bubblewrap adds (namespaces, mounts, its init process).

    python -m bench.sandbox [--runs 200]

Timing is never asserted; the figures are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from bench.common import percentiles, table
from bot.conversation import Conversation
from bot.llm import ToolCall
from bot.tools import ExecSettings, ToolContext, builtin_registry, require_sandbox

WARMUP = 5


async def measure(settings: ExecSettings, workspace: Path, runs: int) -> list[float]:
    """Milliseconds per ``exec true``, ``runs`` times after a short warm-up."""
    registry = builtin_registry(exec_enabled=True, exec_settings=settings)
    ctx = ToolContext(workspace, Conversation.of_key("agent:main:bench:dm:1"), "bench", "main", "1", sender_is_owner=True)
    call = [ToolCall("c1", "exec", json.dumps({"command": "true"}))]
    samples = []
    for i in range(WARMUP + runs):
        started = time.perf_counter()
        [result] = await registry.execute(call, ctx)
        elapsed = (time.perf_counter() - started) * 1000
        if result.content != "[exit code 0]":
            raise RuntimeError(f"exec true gave {result.content!r}")
        if i >= WARMUP:
            samples.append(elapsed)
    return samples


async def run(runs: int) -> list[tuple[str, dict[str, float]]]:
    require_sandbox(ExecSettings())
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-") as tmp:
        rows = []
        for name, settings in (("sandbox: none", ExecSettings(sandbox="none")), ("sandbox: bwrap", ExecSettings())):
            rows.append((name, percentiles(await measure(settings, Path(tmp), runs))))
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="calls per setting (default 200)")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args.runs))
    print(f"exec `true`, {args.runs} calls each (ms)")
    print(table(["setting", "median", "p90", "p99", "max"],
                [(name, *(f"{p[k]:.1f}" for k in ("p50", "p90", "p99", "max"))) for name, p in rows]))
    base, boxed = rows[0][1], rows[1][1]
    print(f"the sandbox adds {boxed['p50'] - base['p50']:.1f} ms at the median, {boxed['p99'] - base['p99']:.1f} ms at p99")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
