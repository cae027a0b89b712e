"""What the dashboard is told by the composition root: where to listen, how, and who may log in.

Built from ``dashboard:`` in the config (``bot.dashboard.capability.settings_of``); the
config has already refused a bind that is not safe (a non-loopback address without
``allow_remote``, a remote one without TLS or a proxy), so this only carries the decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig

LOOPBACK = (ip_network("127.0.0.0/8"), ip_network("::1/128"))


class Role(StrEnum):
    VIEWER = "viewer"  # sees every page, changes nothing
    OPERATOR = "operator"  # also stops runs, decides pairing requests, pauses and cancels jobs

    @property
    def may_act(self) -> bool:
        return self is Role.OPERATOR


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: Role
    password_hash: str | None  # None: this user cannot log in


@dataclass(frozen=True, slots=True)
class DashboardSettings:
    host: str = "127.0.0.1"
    port: int = 8787  # 0 picks a free port (tests)
    users: Mapping[str, User] = field(default_factory=dict)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    behind_proxy: bool = False  # trust X-Forwarded-For, -Proto and -Host from the proxy
    trusted_proxies: tuple[IPv4Network | IPv6Network, ...] = LOOPBACK  # ... when the peer is one of these
    session_hours: float = 12.0  # a login lasts this long, however busy

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def secure(self) -> bool:
        """The browser reaches the page over https (ours, or the proxy's): cookies get ``Secure``."""
        return self.tls or self.behind_proxy

    @property
    def shown_bind(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def can_log_in(self) -> bool:
        return any(u.password_hash for u in self.users.values())


def settings_of(config: CoreConfig) -> DashboardSettings:
    """``dashboard:`` as the dashboard takes it."""
    from ipaddress import ip_network

    from bot.config.binds import parse_bind
    from bot.dashboard.config import DashboardConfig

    d = config.section("dashboard", DashboardConfig)
    host, port = parse_bind(d.bind)
    users = {name: User(name, Role(u.role), u.password_hash.get_secret_value() if u.password_hash else None)
             for name, u in d.users.items()}
    proxies = tuple(ip_network(p, strict=False) for p in d.trusted_proxies)
    return DashboardSettings(host, port, users, d.tls_cert, d.tls_key, d.behind_proxy, proxies)
