"""Before against after, alternated: ``python -m bench.alternate REV [--after REV2] [--rounds N] -- BENCH ARGS``.

Runs ``python -m bench BENCH ARGS`` (``--only overhead``, say) on the tree at git revision REV
and on this working tree (or at REV2), one after the other, N times (3 by default), and prints each figure
of each round side by side with the medians. REV (and REV2) is checked out in a temporary
worktree, removed at the end. The harness and the fakes are this tree's for both; only the bot differs
(``BENCH_BOT_TREE``). The environment (``BENCH_OVERHEAD``, ``BENCH_STORE``...) is passed as it
is to both. Alternating is what makes two trees comparable on a shared machine, whose speed
drifts between minutes more than a small change moves a figure; the rounds' spread says how
much a difference must be to mean something.

    python -m bench.alternate HEAD~1 -- --only overhead
    BENCH_STORE=postgres python -m bench.alternate main --rounds 5 -- --only overhead
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run_once(tree: Path, args: list[str], out: Path) -> dict[str, float]:
    """One run of the bench with the bot of ``tree``: its figures by name. The harness and the fakes
    are this tree's for both (the same measurement); the bot it starts imports ``tree``'s code."""
    env = {**os.environ, "BENCH_BOT_TREE": str(tree)}
    subprocess.run([sys.executable, "-m", "bench", *args, "--out", str(out)], cwd=HERE, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    found = json.loads(out.read_text())
    return {f"{f['scenario']}: {f['name']}": float(f["value"]) for f in found["figures"]
            if isinstance(f.get("value"), (int, float))}


def table(before: list[dict[str, float]], after: list[dict[str, float]]) -> str:
    names = [name for name in before[0] if all(name in r for r in before + after)]
    width = max((len(n) for n in names), default=10)
    lines = [f"{'figure':{width}}  {'before (each round)':28}  {'after (each round)':28}  median before -> after"]
    for name in names:
        b, a = [r[name] for r in before], [r[name] for r in after]
        lines.append(f"{name:{width}}  {', '.join(f'{v:g}' for v in b):28}  {', '.join(f'{v:g}' for v in a):28}  "
                     f"{statistics.median(b):g} -> {statistics.median(a):g}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternate", description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the git revision to compare this working tree with")
    parser.add_argument("--after", help="a git revision to measure instead of this working tree")
    parser.add_argument("--rounds", type=int, default=3)
    argv = sys.argv[1:]
    ours, bench_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(ours)
    with tempfile.TemporaryDirectory(prefix="chatgate-alternate-") as tmp:
        trees = {"before": args.rev, **({"after": args.after} if args.after else {})}
        for name, rev in trees.items():
            subprocess.run(["git", "worktree", "add", "--detach", str(Path(tmp) / name), rev], cwd=HERE, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        old, new = Path(tmp) / "before", Path(tmp) / "after" if args.after else HERE
        try:
            before: list[dict[str, float]] = []
            after: list[dict[str, float]] = []
            for n in range(args.rounds):
                print(f"round {n + 1} of {args.rounds}", file=sys.stderr, flush=True)
                before.append(run_once(old, bench_args, Path(tmp) / f"before-{n}.json"))
                after.append(run_once(new, bench_args, Path(tmp) / f"after-{n}.json"))
        finally:
            for name in trees:
                subprocess.run(["git", "worktree", "remove", "--force", str(Path(tmp) / name)], cwd=HERE, check=False)
    print(table(before, after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
