"""Storage: the Store port and its SQLite implementation.

Open with ``async with SQLiteStore(path) as store`` or ``store = await open_store(path)``
(then ``await store.close()``). A later PostgreSQL store would join here.
"""

from bot.store.base import InboundRecord, Session, Store, Turn, UsageTotals
from bot.store.sqlite import SQLiteStore, open_store

__all__ = ["InboundRecord", "SQLiteStore", "Session", "Store", "Turn", "UsageTotals", "open_store"]
