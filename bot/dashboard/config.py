"""``dashboard:``, the config section of the operator dashboard (``bot.dashboard``): a web
page served by ``chatgate run`` when ``enabled``, or alone by ``chatgate dashboard``; bound to
this machine unless ``allow_remote`` with TLS (``bot.config.binds``: the bind rules every
server shares). Imports only the config's building blocks and the password check (stdlib)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError

from bot.config.binds import is_loopback, parse_bind
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

    role: Literal["viewer", "operator"] = Field(default="viewer", description="viewer: sees everything, changes "
        "nothing | operator: also stops runs, decides pairing requests, pauses and cancels jobs")
    password_hash: Annotated[Secret, AfterValidator(_password_hash)] = Field(default=None, description="the scrypt "
        "hash `chatgate dashboard passwd` writes, never the password; none (or empty): this user cannot log in")


class DashboardConfig(CapabilitySection):
    model_config = ConfigDict(json_schema_extra={"description": "the operator dashboard (runs live with Stop, "
                                                                "conversations, usage): docs/guide/dashboard.md"})

    enabled: bool = Field(default=False, description="true: `chatgate run` serves it (`chatgate dashboard` alone too)")
    bind: str = Field(default=DEFAULT_DASHBOARD_BIND, description="host:port; loopback only unless allow_remote")
    allow_remote: bool = Field(default=False, description="true: other machines may connect, only over TLS (tls_cert "
        "and tls_key) or behind_proxy; an SSH tunnel is simpler: ssh -L 8787:127.0.0.1:8787 yourserver")
    tls_cert: Path | None = Field(default=None, description="PEM certificate (chain): the dashboard serves https")
    tls_key: Path | None = Field(default=None, description="the certificate's private key (PEM)")
    behind_proxy: bool = Field(default=False, description="a TLS proxy in front: trust X-Forwarded-For/-Proto/-Host")
    trusted_proxies: tuple[Annotated[str, AfterValidator(_proxy)], ...] = Field(
        default=("127.0.0.0/8", "::1"), description="... only from these peers (addresses or networks): the proxy's "
        "own address; anyone else is counted by its own address")
    users: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")], DashboardUserConfig] = Field(
        default={}, description="who may log in; `chatgate dashboard passwd -c config.yaml NAME --role operator` "
        "sets a password and writes the user here", examples=[{"ann": {"role": "operator", "password_hash": (
            "scrypt$n=131072,r=8,p=1$bqPzz0w+uZkxDvDkHibX6w==$JHElHP4LV/rCHg2kbe0/3ODeVeyIJ33dZkTiJXt2+2g=")}}])

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
