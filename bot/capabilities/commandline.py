"""What a capability's ``chatgate`` subcommand needs beside its arguments: the bot's database
as configured, and one line when there is none yet. ``bot.cli`` uses the same two."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig
    from bot.store.pg import PostgresStore
    from bot.store.sqlite import SQLiteStore


def store_of(config: CoreConfig) -> SQLiteStore | PostgresStore:
    """The configured store, unopened (``async with store_of(config) as store``); a small pool."""
    from bot.store import store_for

    return store_for(config.storage.path, config.storage.database_url, pool_size=2, backups=config.storage.backups)


def no_database(config: CoreConfig) -> bool:
    """On SQLite before the first run: nothing to read yet (said in one line)."""
    if config.storage.database_url is None and not config.storage.path.exists():
        print(f"no database at {config.storage.path} yet")
        return True
    return False
