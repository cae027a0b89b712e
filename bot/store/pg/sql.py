"""SQL written once for both dialects: ``?`` placeholders numbered for PostgreSQL."""

from __future__ import annotations

import itertools
import re


def numbered(statement: str) -> str:
    """``?`` -> ``$1``, ``$2`` ... in order (the shared statements hold no ``?`` in a literal)."""
    counter = itertools.count(1)
    return re.sub(r"\?", lambda _: f"${next(counter)}", statement)
