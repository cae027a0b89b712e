"""Safe upgrades: what a database lacks (``chatgate migrate --check``, ``chatgate doctor``), read
without changing anything, and the copy of a SQLite database kept before its migrations run.

``Pending`` lists the migrations a database lacks by name: the core's (``MIGRATIONS``, in order)
and each capability package's (``CapabilitySpec.migrations``, given here as ``(owner, steps)``
pairs so that the store knows no capability). A database written by a newer chatgate raises
``SchemaTooNewError`` (one line) for the core's and for a package's migrations alike.

``backup`` copies a SQLite database with SQLite's online backup API (a consistent copy of a
database in WAL mode, not a copy of its file, which could miss what the WAL holds) beside it,
named ``<file>.v<schema version>-<UTC time>.bak`` (0600), and keeps the newest ``keep``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from bot.errors import StoreCorruptError
from bot.store.migrations import MIGRATIONS, _check_not_newer
from bot.store.schema_steps import Migration
from bot.store.steps import pending as pending_steps

Steps = Sequence[tuple[str, Sequence[Migration]]]  # (capability name, its migrations)


@dataclass(frozen=True, slots=True)
class Pending:
    where: str
    version: int  # the core's schema version found (0: empty or not there yet)
    core: tuple[str, ...]  # the core's migrations it lacks, in order
    steps: tuple[str, ...]  # the capability packages' migrations it lacks

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.core, *self.steps)

    def lines(self) -> list[str]:
        """What ``chatgate migrate --check`` prints."""
        if not self.names:
            return [f"{self.where}: up to date (schema version {self.version}), nothing to apply"]
        head = (f"{self.where}: schema version {self.version}" if self.version else f"{self.where}: new") + \
            f"; {len(self.names)} migration{'s' if len(self.names) != 1 else ''} would be applied:"
        return [head, *(f"  {name}" for name in self.names)]


def _pending(where: str, version: int, applied_steps: set[str], steps: Steps) -> Pending:
    _check_not_newer(version, len(MIGRATIONS), where)
    todo = [m.name for owner, owned in steps for m in pending_steps(owner, owned, {
        name for name in applied_steps if name.startswith(f"{owner}/")}, where)]
    return Pending(where, version, tuple(m.name for m in MIGRATIONS[version:]), tuple(todo))


def _read_sqlite(path: Path) -> tuple[int, set[str]]:
    if not path.exists():
        return 0, set()
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        has = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'capability_migrations'")
        names = {str(r[0]) for r in db.execute("SELECT name FROM capability_migrations")} if has.fetchone() else set()
        return version, names


async def pending_sqlite(path: str | os.PathLike[str], steps: Steps = ()) -> Pending:
    """What the SQLite database at ``path`` lacks (opened read-only: nothing changes)."""
    file = Path(path).expanduser()
    try:
        version, applied = await asyncio.to_thread(_read_sqlite, file)
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(f"not a chatgate database or corrupt: {file} ({exc})") from None
    return _pending(str(file), version, applied, steps)


async def pending_postgres(url: str, steps: Steps = ()) -> Pending:
    """What the PostgreSQL database at ``url`` lacks (read only: nothing changes)."""
    import asyncpg

    from bot.store.pg.base import safe_url
    from bot.store.pg.schema import HAS_TABLE, _applied, _check, names

    where = safe_url(url)
    conn = await asyncpg.connect(url)
    try:
        version = _check(await _applied(conn), names(), where)
        has = await conn.fetchval(HAS_TABLE, "capability_migrations")
        applied = {r["name"] for r in await conn.fetch("SELECT name FROM capability_migrations")} if has else set()
    finally:
        await conn.close()
    return _pending(where, version, applied, steps)


def backup(path: str | os.PathLike[str], version: int, keep: int, *, now: float | None = None) -> Path:
    """Copy the SQLite database at ``path`` (schema ``version``) beside it; keep the newest ``keep``."""
    source = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    target = source.with_name(f"{source.name}.v{version}-{stamp}.bak")
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    os.close(os.open(partial, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(partial)) as dst:
        src.backup(dst)
    os.replace(partial, target)
    for old in backups(source)[:-keep] if keep > 0 else ():
        old.unlink(missing_ok=True)
    return target


def backups(path: str | os.PathLike[str]) -> list[Path]:
    """The copies ``backup`` kept of the database at ``path``, oldest first."""
    source = Path(path)
    found = [p for p in source.parent.glob(f"{source.name}.v*-*.bak") if p.is_file()]
    return sorted(found, key=lambda p: (p.name.rsplit("-", 1)[-1], p.stat().st_mtime))
