"""(being written)"""

from __future__ import annotations

from bot.store.pg.base import PgBase


class PgBrowse(PgBase):
    pass
