"""``chatgate migrate``: make or upgrade the database's tables, or with ``--check`` say what that
would change and change nothing.

The database is ``--to`` (a PostgreSQL URL; with ``--from``, a SQLite file copied into it) or the
one the config names (``-c``: ``storage.url``, else ``storage.path``). Every registered
capability's tables are included, enabled or not, so that the bot may then run as a role with
data rights only. On SQLite a copy is kept before migrating (``storage.backups``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import ConfigError

if TYPE_CHECKING:
    from bot.store.schema_steps import Migration


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = sub.add_parser("migrate", help="make or upgrade the database's tables (PostgreSQL: as its owner); "
                                             "--check says what would change; --from copies a SQLite database "
                                             "into an empty PostgreSQL one")
    migrate.add_argument("--from", dest="source", help="the SQLite file to copy, e.g. data/chatgate.db")
    migrate.add_argument("--to", dest="target", help="postgresql://user:password@host/database (default: the "
                                                     "config's storage)")
    migrate.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else environment)")
    migrate.add_argument("--check", action="store_true", help="list the pending migrations (the core's and the "
                                                              "capabilities'), change nothing")
    migrate.set_defaults(run=run, no_config=True)  # with --to, no config is read at all


def _steps() -> list[tuple[str, tuple[Migration, ...]]]:
    from bot.capabilities import registry

    return [(spec.name, spec.migrations) for spec in registry.specs() if spec.migrations]


def _derived() -> tuple[str, ...]:
    """The capabilities' tables that their triggers rebuild (a search index): never copied."""
    from bot.capabilities import registry

    return tuple(pattern for spec in registry.specs() for pattern in spec.derived)


async def run(_config: None, args: argparse.Namespace) -> int:
    from bot.store.upgrade import pending_postgres, pending_sqlite

    target: str | None = args.target
    path = Path()
    backups = 0
    if target is None:
        if args.source is not None:
            print("chatgate: --from needs --to postgresql://...", file=sys.stderr)
            return 2
        from bot.settings import load_config

        try:
            config = load_config(args.config, require_secrets=False)
        except ConfigError as exc:
            print(f"chatgate: {exc}", file=sys.stderr)
            return 2
        target, path, backups = config.storage.database_url, config.storage.path, config.storage.backups
    elif not target.startswith(("postgresql://", "postgres://")):
        print(f"chatgate: --to must be a postgresql:// URL, got {target.split('://')[0]}://...", file=sys.stderr)
        return 2
    if args.check:
        if args.source is not None:
            print("chatgate: --check does not copy; leave out --from", file=sys.stderr)
            return 2
        found = await (pending_postgres(target, _steps()) if target else pending_sqlite(path, _steps()))
        print("\n".join(found.lines()))
        return 0
    if target is None:
        return await _sqlite(path, backups)
    return await _postgres(args.source, target)


async def _sqlite(path: Path, backups: int) -> int:
    from bot.store import SQLiteStore
    from bot.store.upgrade import backups as kept
    from bot.store.upgrade import pending_sqlite

    before = await pending_sqlite(path, _steps())
    async with SQLiteStore(path, backups=backups) as store:
        for owner, steps in _steps():
            await store.apply_steps(owner, steps)
    if not before.names:
        print(f"{before.where}: up to date, nothing to apply")
        return 0
    print(f"{before.where}: {len(before.names)} migration{'s' if len(before.names) != 1 else ''} applied")
    if before.version and backups:
        print(f"a copy of schema version {before.version} is kept at {kept(before.where)[-1]}")
    return 0


async def _postgres(source: str | None, target: str) -> int:
    from bot.capabilities import registry
    from bot.doctor.copy import copy_sqlite_to_postgres
    from bot.store.pg import PostgresStore

    if source is not None:  # the source is checked before anything is done to the target
        copied = await copy_sqlite_to_postgres(source, target, steps=_steps(), derived=_derived())
        print(f"copied {sum(c.rows for c in copied)} rows in {len(copied)} tables (counts checked):")
        for c in copied:
            print(f"  {c.table:<18} {c.rows}")
    async with PostgresStore(target) as store:  # every table, so that the bot may run as a role with data rights
        async with store.pool.acquire() as conn:  # the tables of PostgreSQL's own (the cluster's)
            clustered = sum([await spec.postgres(conn) for spec in registry.specs() if spec.postgres is not None])
        done = store.migrated
        for owner, steps in _steps():  # every registered capability's tables, enabled or not
            done += await store.apply_steps(owner, steps)
    if done or clustered:
        print(f"{store.where}: {done} store migration{'s' if done != 1 else ''} and {clustered} cluster "
              f"migration{'s' if clustered != 1 else ''} applied")
    elif source is None:
        print(f"{store.where}: up to date, nothing to apply")
    return 0
