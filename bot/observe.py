"""What the core tells whoever watches it (metrics, traces): one call at each point of interest.

    observe.signal(Signal.MESSAGE_IN, platform=msg.platform)
    stop = observe.listen(callback)     # the ops capability, while it runs; stop() to leave

A signal is a frozen ``Observed``: its kind, the platform, a bounded ``reason`` (an access
action, an approval outcome, an MCP server's state), a bounded ``name`` (a tool, an MCP server,
a kind of lease), a number (seconds, a count) and ``ref`` (the answer or run it is about: never
a label, only to join a delivery to its run's trace). Nothing in it names a person or carries
what they wrote.

The run's own events (started, tool calls, usage, its end with its trace) are on the run
``EventBus`` (``bot.agent.events``); these are what happens around runs. Listening is
process-wide (one bot per process); with nobody listening a signal costs one call and one
test of an empty list: no object is built. A listener is called inline, must be quick, and
one that raises is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger(__name__)


class Signal(StrEnum):
    MESSAGE_IN = "message.in"  # a new inbound message stored (platform)
    NOT_RUN = "message.not_run"  # not run (platform; reason: refuse, ignore, pair, limit)
    DELIVERY_OWED = "delivery.owed"  # an answer handed to delivery (platform)
    DELIVERED = "delivery.done"  # every chunk sent (platform; value: seconds it took; ref: answer id)
    GIVEN_UP = "delivery.given_up"  # an answer given up (platform; ref: answer id)
    STOPPED = "run.stopped"  # /stop ended a run (value: seconds from the stop to the run's end)
    SCHEDULE_LAG = "schedule.lag"  # an occurrence claimed (value: seconds after its due time)
    APPROVAL_ASKED = "approval.asked"  # a person asked to approve a call (name: the tool)
    APPROVAL_ANSWERED = "approval.answered"  # it ended (name: the tool; reason: the outcome)
    MCP_STATE = "mcp.state"  # an MCP server's state changed (name: the server; reason: its state)
    LEASES = "cluster.leases"  # leases this instance holds (name: sessions | channels; value: how many)
    HEARTBEAT = "cluster.heartbeat"  # the cluster heartbeat (value: 1 renewed, 0 failed)


@dataclass(frozen=True, slots=True)
class Observed:
    kind: Signal
    platform: str = ""
    reason: str = ""
    name: str = ""
    value: float = 1.0
    ref: str = ""


Listener = Callable[[Observed], None]

_listeners: list[Listener] = []


def signal(kind: Signal, *, platform: str = "", reason: str = "", name: str = "", value: float = 1.0,
           ref: str = "") -> None:
    """Tell every listener (none: nothing is built)."""
    if not _listeners:
        return
    observed = Observed(kind, platform, reason, name, value, ref)
    for listener in tuple(_listeners):
        try:
            listener(observed)
        except Exception:
            log.exception("observer failed on %s", kind)


def listen(listener: Listener) -> Callable[[], None]:
    """Call ``listener`` with every signal from now on; the returned function stops it."""
    _listeners.append(listener)

    def stop() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return stop
