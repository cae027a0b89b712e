"""Count the bot's PostgreSQL statements: ``python -m bench.pgcount OUT bot run -c CONFIG`` runs
``python -m bot run -c CONFIG`` with asyncpg's connection wrapped, and writes to OUT, when the bot
exits, every statement sent (BEGIN and COMMIT included; an ``executemany`` counts once: one
round trip) with how often, most frequent first.

The benchmark's bot runs this way with ``BENCH_PG_STATEMENTS=OUT`` (bench.common.BotProcess);
the overhead scenario then divides by the messages it sent (the start-up's statements included,
a few dozen over hundreds of messages).
"""

from __future__ import annotations

import collections
import runpy
import sys
from pathlib import Path
from typing import Any

import asyncpg
from asyncpg import connection

COUNTS: collections.Counter[str] = collections.Counter()


def _wrap() -> None:
    cls = connection.Connection
    execute, run, many = cls.execute, cls._execute, cls._executemany

    async def counted_execute(self: Any, query: str, *args: Any, timeout: float | None = None) -> Any:
        if not args:  # the simple protocol (with args it goes through _execute, counted there)
            COUNTS[query] += 1
        return await execute(self, query, *args, timeout=timeout)

    async def counted_run(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        COUNTS[query] += 1
        return await run(self, query, *args, **kw)

    async def counted_many(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        COUNTS[query] += 1
        return await many(self, query, *args, **kw)

    cls.execute, cls._execute, cls._executemany = counted_execute, counted_run, counted_many  # type: ignore[method-assign]


def _write(out: Path) -> None:
    lines = [f"{n}\t{' '.join(q.split())}" for q, n in COUNTS.most_common()]
    out.write_text(f"{sum(COUNTS.values())}\ttotal\n" + "\n".join(lines) + "\n")


def main() -> None:
    out, module, *args = sys.argv[1:]
    _wrap()
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        _write(Path(out))


assert asyncpg  # imported for its connection module's class
if __name__ == "__main__":
    main()
