"""``dashboard:``, the config section of the operator dashboard (``bot.dashboard``): a web
page served by ``chatgate run`` when ``enabled``, or alone by ``chatgate dashboard``; bound to
this machine unless ``allow_remote`` with TLS (``bot.config.dashboard``: the bind rules every
server shares). Imports only the config's building blocks and the password check (stdlib)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError

from bot.config.dashboard import is_loopback, parse_bind
from bot.config.types import CapabilitySection, Secret, Section
from bot.errors import ConfigError
from bot.web.passwords import problem

DEFAULT_DASHBOARD_BIND = "127.0.0.1:8787"


def _password_hash(value: SecretStr | None) -> SecretStr | None:
    if value is not None:
        if (why := problem(value.get_secret_value())) is not None:
            raise PydanticCustomError("password_hash", why)
    return value


def _proxy(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise PydanticCustomError("proxy", "expected an IP address or network such as 10.0.0.5 or 10.0.0.0/24, "
                                           "got {value!r}", {"value": value}) from None
    return value


class DashboardUserConfig(Section):
    """One person who may log in to the dashboard."""

    role: Literal["viewer", "operator"] = "viewer"  # viewers see everything and change nothing
    # scrypt hash from `chatgate dashboard passwd`; none (or empty): this user cannot log in
    password_hash: Annotated[Secret, AfterValidator(_password_hash)] = None


class DashboardConfig(CapabilitySection):
    """The operator dashboard (``bot.dashboard``): a web page served by ``chatgate run`` when
    ``enabled``, or alone by ``chatgate dashboard``."""

    enabled: bool = False
    bind: str = DEFAULT_DASHBOARD_BIND  # host:port; loopback only unless allow_remote
    allow_remote: bool = False  # a non-loopback bind, then only with TLS or behind_proxy
    tls_cert: Path | None = None  # PEM certificate chain and key: the dashboard serves https
    tls_key: Path | None = None
    behind_proxy: bool = False  # a TLS proxy in front: trust its X-Forwarded-For/-Proto/-Host
    # ... only from these peers (the proxy's own address); the default: a proxy on this machine
    trusted_proxies: tuple[Annotated[str, AfterValidator(_proxy)], ...] = ("127.0.0.0/8", "::1")
    users: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")], DashboardUserConfig] = {}

    @model_validator(mode="after")
    def _safe_to_serve(self) -> DashboardConfig:
        try:
            host, _ = parse_bind(self.bind)
        except ValueError:
            raise ConfigError("dashboard.bind", f"expected host:port such as {DEFAULT_DASHBOARD_BIND}, "
                                                f"got {self.bind!r}") from None
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("dashboard.tls_key" if self.tls_key is None else "dashboard.tls_cert",
                              "missing", "https needs both tls_cert and tls_key")
        if not is_loopback(host) and not self.allow_remote:
            raise ConfigError("dashboard.bind", f"{self.bind} can be reached from other machines, and the dashboard "
                              "binds to this machine only", "use 127.0.0.1 with an SSH tunnel, or set "
                              "dashboard.allow_remote: true with tls_cert and tls_key or behind_proxy")
        if self.allow_remote and self.tls_cert is None and not self.behind_proxy:
            raise ConfigError("dashboard.allow_remote", "a remote dashboard needs TLS",
                              "set dashboard.tls_cert and tls_key, or behind_proxy: true behind a TLS proxy")
        return self

    def private_paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.tls_cert, self.tls_key) if p is not None)

    def warnings(self) -> list[str]:
        if self.enabled and not any(u.password_hash for u in self.users.values()):
            return ["dashboard.enabled but no user in dashboard.users has a password: `chatgate run` will not "
                    "start (set one with `chatgate dashboard passwd -c CONFIG NAME`)"]
        return []

    def describe(self) -> list[str]:
        users = [u.role for u in self.users.values() if u.password_hash]
        shown = (f"{self.bind}{', https' if self.tls_cert else ''}{', behind a proxy' if self.behind_proxy else ''}; "
                 f"{len(users)} user{'s' if len(users) != 1 else ''} with a password "
                 f"({users.count('operator')} operator{'s' if users.count('operator') != 1 else ''})")
        return [f"dashboard  {'on at ' + shown if self.enabled else 'off (chatgate dashboard serves it alone)'}"]
