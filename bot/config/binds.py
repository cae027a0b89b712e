"""The ``host:port`` rules every server of the bot shares (the dashboard's, the ops probes',
the API's): a bind is parsed one way, and one that other machines can reach needs TLS and
consent (each server's section says how)."""

from __future__ import annotations

import ipaddress
import re

_BIND = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>\d{1,5})")


def parse_bind(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8787`` for IPv6) -> (host, port); ValueError when it is not one."""
    match = _BIND.fullmatch(value.strip())
    if match is None or int(match.group("port")) > 65535:
        raise ValueError(value)
    return match.group("v6") or match.group("host"), int(match.group("port"))


def is_loopback(host: str) -> bool:
    """Only this machine can reach ``host``: 127.0.0.0/8, ::1 or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything
