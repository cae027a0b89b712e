"""The PostgreSQL side of the SQL: the ``?`` of the statements written once, numbered
(``numbered``; what only PostgreSQL runs, the cluster's statements, the fence, a capability's
take-over, is written with ``$1`` ... and passes through unchanged), the database's clock, and the
cluster's liveness condition that both the cluster and the claims of work use."""

from __future__ import annotations

import itertools
import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def numbered(statement: str) -> str:
    """``?`` -> ``$1``, ``$2`` ... in order (the shared statements hold no ``?`` in a literal); cached,
    as the statements are few (a list parameter is one array, whatever its length)."""
    counter = itertools.count(1)
    return re.sub(r"\?", lambda _: f"${next(counter)}", statement)


NOW = "extract(epoch from clock_timestamp())"  # the database's clock: one clock for every instance


def alive(column: str, lease_seconds: str = "$1") -> str:
    """SQL: the instance named in ``column`` is alive (a heartbeat within ``lease_seconds``, a
    parameter or a number). For work claimed by instance: delivery claims, a capability's claimed rows."""
    return (f"EXISTS (SELECT 1 FROM cluster_instances n WHERE n.id = {column} AND n.stopped_at IS NULL"
            f" AND n.seen_at >= {NOW} - {lease_seconds})")
