"""A server's state as others read it (no SDK here: the status commands and the hub's
light half import it before the SDK is loaded)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    CONNECTING = "connecting"
    READY = "ready"
    DEGRADED = "degraded"
    DOWN = "down"

    @property
    def usable(self) -> bool:
        return self in (State.READY, State.DEGRADED)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What others may read of a supervisor at one moment."""

    state: State
    tools: int
    last_error: str | None
    since: float  # time.time() of the last state change
    retry_at: float | None  # time.time() of the next attempt while down
