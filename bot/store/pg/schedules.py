"""(being written)"""

from __future__ import annotations

from bot.store.pg.base import PgBase


class PgSchedules(PgBase):
    pass
