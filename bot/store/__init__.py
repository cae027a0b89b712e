"""Storage: the Store ports (``base``), their operations written once (``operations``, one
module per port, on ``op``'s statements and ``engine``'s spellings, ``migrations``), and two
drivers: SQLite (``sqlite``) and PostgreSQL (``pg``).

Open with ``async with SQLiteStore(path) as store`` or ``store = await SQLiteStore(path).open()``
(then ``await store.close()``); ``store_for`` opens what the config names: PostgreSQL when
``storage.url`` is set (``bot.store.pg``, asyncpg imported only then), else the SQLite file.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bot.store.base import AppStore
from bot.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from bot.store.pg import PostgresStore


def store_for(path: str | os.PathLike[str], url: str | None = None, *,
              pool_size: int = 10, backups: int = 0) -> SQLiteStore | PostgresStore:
    """The configured store, not opened yet: PostgreSQL at ``url``, else SQLite at ``path`` (keeping
    ``backups`` copies made before migrations)."""
    if url:
        from bot.store.pg import PostgresStore

        return PostgresStore(url, pool_size=pool_size)
    return SQLiteStore(path, backups=backups)


__all__ = ["AppStore", "SQLiteStore", "store_for"]
