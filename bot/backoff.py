"""The one backoff of the project: every retry (providers, polling, delivery) waits by it.

``Backoff(base, factor, cap).delay(n)`` is the wait before retry ``n`` (1-based):
exponential, capped, with full jitter (uniform in ``[0, ceiling]``) unless ``jitter`` is off;
a server's own ``retry_after`` wins when given (``wait``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    base: float = 1.0
    factor: float = 2.0
    cap: float = 30.0
    jitter: bool = True

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        ceiling = min(self.cap, self.base * self.factor ** max(0, retry - 1))
        return ceiling * rand() if self.jitter else ceiling

    def wait(self, retry: int, retry_after: float | None) -> float:
        """The server's ``retry_after`` when it gave one, else ``delay(retry)``."""
        return max(0.0, retry_after) if retry_after is not None else self.delay(retry)
