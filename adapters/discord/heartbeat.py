"""Zombie connections: Discord's rule, which discord.py only approximates.

Discord: "If a client does not receive a heartbeat ACK between its attempts at sending
heartbeats, this may be due to a failed or 'zombied' connection. The client should
immediately terminate the connection with any close code besides 1000 or 1001, then
reconnect and attempt to Resume." discord.py 2.7 instead closes a connection after
``heartbeat_timeout`` (60 s) without any frame, so a socket that is open but silent goes
unnoticed for a minute. ``watch`` applies Discord's rule: it reads the ack state of the
client's keep-alive thread (``state``: private attributes of ``discord.gateway.
KeepAliveHandler``, read defensively; when they are gone nothing happens and discord.py's
own timeout still applies) and closes a zombie with 4000, which discord.py answers with a
RESUME.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

GRACE = 2.0  # seconds past the next heartbeat before an unanswered one counts


def is_zombie(last_send: float, last_ack: float, interval: float, now: float, grace: float = GRACE) -> bool:
    """A heartbeat is unanswered, and the last ACK is older than one interval (plus ``grace``):
    the next heartbeat went out (or is due) with no ACK in between."""
    return last_send > last_ack and now - last_ack > interval + grace


def state(client: Any) -> tuple[float, float, float] | None:
    """(last heartbeat sent, last ACK, interval) of the live connection, on ``time.perf_counter``."""
    keep_alive = getattr(getattr(client, "ws", None), "_keep_alive", None)
    send, ack, interval = (getattr(keep_alive, name, None) for name in ("_last_send", "_last_ack", "interval"))
    if keep_alive is None or not (isinstance(send, (int, float)) and isinstance(ack, (int, float))
                                  and isinstance(interval, (int, float))):
        return None
    return send, ack, interval


async def watch(current: Callable[[], Any], every: float = 1.0, grace: float = GRACE) -> None:
    """Forever: close the connection of ``current()`` (the client now) when it is a zombie."""
    while True:
        await asyncio.sleep(every)
        client = current()
        found = state(client) if client is not None else None
        if found is None:
            continue
        last_send, last_ack, interval = found
        if is_zombie(last_send, last_ack, interval, time.perf_counter(), grace):
            log.warning("discord: no heartbeat ACK for %.1f s; reconnecting", time.perf_counter() - last_ack)
            try:
                await client.ws.close(4000)
            except Exception as exc:  # noqa: BLE001 - the connection is dead either way
                log.debug("discord: closing a zombie connection failed: %s", exc)
