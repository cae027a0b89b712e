"""chatgate end to end, driven the way Telegram drives it.

The fake LLM (``tests.fakes.llm_server``) and the fake Telegram Bot API
(``tests.fakes.telegram_server``) run as child processes, and so does the bot:
``chatgate run`` with a config pointing at them (storage and workspaces in a temp
directory). Messages go in as Updates pushed to the fake Telegram, which hands them to
the bot's long poll; answers are the sendMessage and editMessageText calls it records.
Each scenario starts its own processes, and restarts the bot when it needs another
config. The table shows every figure beside its goal and the peer's figure for scale;
``bench/results.json`` keeps them with the machine they were measured on.

    python -m bench [--only NAME] [--quick]

Timing is never asserted: a missed goal is reported, not a failure. The exit code is 1
only when a scenario could not run (an error), else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

from bench.report import Figure, describe, machine, render, write_json
from bench.scenarios import SCENARIOS

RESULTS = Path(__file__).resolve().parent / "results.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=list(SCENARIOS), metavar="NAME",
                        help=f"run one scenario: {', '.join(SCENARIOS)}")
    parser.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run (under a minute)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"where to write the results (default {RESULTS})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    info = machine()
    chosen = {name: m for name, m in SCENARIOS.items() if args.only in (None, name)}
    figures: list[Figure] = []
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    for name, scenario in chosen.items():
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            figures += asyncio.run(_run(scenario, args.quick))
        except Exception as exc:  # one broken scenario does not hide the others' figures
            errors[name] = f"{type(exc).__name__}: {exc}"
            print(f"bench: {name} failed: {errors[name]}", file=sys.stderr)
        except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C or SIGTERM; the children are gone
            print(f"bench: interrupted during {name}", file=sys.stderr)
            return 130
        seconds[name] = time.monotonic() - started

    print(f"\nchatgate bench{' (quick)' if args.quick else ''}: {describe(info)}\n")
    print(render(figures))
    print()
    for name, scenario in chosen.items():
        took = f"{seconds[name]:.0f} s" + (f"; FAILED: {errors[name]}" if name in errors else "")
        print(textwrap.fill(f"{name} ({took}): {scenario.HOW}", width=118, subsequent_indent="    "))
    write_json(args.out, info, figures, {name: m.HOW for name, m in chosen.items()}, seconds, errors, args.quick)
    print(f"\nwritten to {args.out}")
    return 1 if errors else 0


async def _run(scenario: ModuleType, quick: bool) -> list[Figure]:
    """The scenario, cancelled by SIGTERM as by Ctrl-C, so its children are stopped either way."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    figures: list[Figure] = await scenario.run(quick)
    return figures


if __name__ == "__main__":
    sys.exit(main())
