"""The top entries of a py-spy profile in raw (collapsed) form, as the bench's README
shows them: the functions that were on the stack most often (inclusive) and the ones
that were running (self), as a share of the samples.

    py-spy record --format raw -o /tmp/bot.txt -p PID       # or BENCH_PYSPY_PHASES=/tmp/bot
    python -m bench.flame /tmp/bot.txt [--top 15] [--only bot]

``--only bot`` counts, for "inclusive", only chatgate's own functions (bot/ and
adapters/), which is where a change can be made; "self" is always every function.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def _frames(stack: str) -> list[str]:
    frames = [f for f in stack.split(";") if f and not f.startswith(("thread (", "process "))]
    return [_short(f) for f in frames]


def _short(frame: str) -> str:
    """``func (path/to/module.py:12)`` as ``func (module/path.py)``, the line left out so
    that one function counts once."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for root in ("site-packages/", "/lib/python3.11/", "/lib/python3.12/", "/lib/python3.13/"):
        path = path.split(root, 1)[-1]
    for own in ("bot/", "adapters/"):
        if f"/{own}" in path and not path.startswith(own):
            path = own + path.rsplit(f"/{own}", 1)[1]
    return f"{name} ({path})"


def top(text: str, count: int, only_own: bool) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        samples = int(n)
        frames = _frames(stack)
        if not frames:
            continue
        total += samples
        leaf[frames[-1]] += samples
        for frame in set(frames):
            if not only_own or frame.split(" (", 1)[1].startswith(("bot/", "adapters/")):
                inclusive[frame] += samples
    return total, inclusive.most_common(count), leaf.most_common(count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flame", description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--only", choices=["bot"], help="inclusive: only chatgate's own functions")
    args = parser.parse_args(argv)
    total, inclusive, leaf = top(args.profile.read_text(), args.top, args.only == "bot")
    print(f"{args.profile}: {total} samples (idle left out)")
    for title, rows in (("inclusive (on the stack)", inclusive), ("self (running)", leaf)):
        print(f"\n{title}")
        for frame, n in rows:
            print(f"  {100 * n / max(total, 1):5.1f} %  {frame}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
