"""Who is logged in, whether a request may do what it asks, and how often one may try.

- ``Sessions``: a login is a random token in an HttpOnly, SameSite=Strict cookie; the server
  keeps only its SHA-256, with the user, a CSRF token of its own and an expiry. In memory: a
  restart logs everyone out.
- ``LoginLimiter``: failed logins counted per client address and per user name in a sliding
  window; past the limit every attempt is refused (the right password too) until the oldest
  failure leaves the window. Time is injected (``clock``).
- ``same_origin`` and ``own_origin``: a POST must say where it comes from (``Origin``, else
  ``Referer``) and that must be this page's own origin; the live feed is refused when a
  browser says it is asked from elsewhere. ``host_allowed``: a loopback dashboard answers
  only to loopback names (a DNS-rebound name is refused before anything else).

Nothing here logs or puts a token into a URL.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bot.dashboard.settings import Role

Clock = Callable[[], float]

MAX_SESSIONS = 1000  # logins kept at once; the oldest goes first
LOGIN_WINDOW = 900.0  # seconds a failed login counts
MAX_FAILURES_PER_ADDRESS = 5
MAX_FAILURES_PER_USER = 10  # from any address: a distributed guess is slowed down too
MAX_TRACKED = 10_000


@dataclass(slots=True)
class Login:
    """One logged-in browser."""

    user: str
    role: Role
    csrf: str
    expires: float
    flash: str = ""  # one line for the next page (what the last action did)

    def take_flash(self) -> str:
        text, self.flash = self.flash, ""
        return text


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Sessions:
    def __init__(self, lifetime: float, *, clock: Clock = time.time) -> None:
        self._lifetime = lifetime
        self._clock = clock
        self._logins: OrderedDict[str, Login] = OrderedDict()  # SHA-256 of the cookie -> login

    def open(self, user: str, role: Role) -> tuple[str, Login]:
        """A new login: (the cookie's value, the login)."""
        token = secrets.token_urlsafe(32)
        login = Login(user, role, secrets.token_urlsafe(32), self._clock() + self._lifetime)
        self._logins[_digest(token)] = login
        while len(self._logins) > MAX_SESSIONS:
            self._logins.popitem(last=False)
        return token, login

    def get(self, token: str | None) -> Login | None:
        if not token:
            return None
        key = _digest(token)
        login = self._logins.get(key)
        if login is not None and login.expires <= self._clock():
            del self._logins[key]
            return None
        return login

    def close(self, token: str | None) -> None:
        if token:
            self._logins.pop(_digest(token), None)

    def __len__(self) -> int:
        return len(self._logins)


def csrf_ok(login: Login, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(login.csrf.encode(), (sent or "").encode("utf-8", "surrogatepass"))


@dataclass(slots=True)
class _Failures:
    times: deque[float] = field(default_factory=deque)


class LoginLimiter:
    def __init__(self, *, clock: Clock = time.monotonic, window: float = LOGIN_WINDOW,
                 per_address: int = MAX_FAILURES_PER_ADDRESS, per_user: int = MAX_FAILURES_PER_USER) -> None:
        self._clock = clock
        self._window = window
        self._limits = {"address": per_address, "user": per_user}
        self._failures: OrderedDict[tuple[str, str], _Failures] = OrderedDict()

    def retry_after(self, address: str, user: str) -> float | None:
        """Seconds until ``address`` may try to log in as ``user`` again; None: it may now."""
        now = self._clock()
        waits = []
        for kind, value in (("address", address), ("user", user.casefold())):
            times = self._recent((kind, value), now)
            if len(times) >= self._limits[kind]:
                waits.append(times[0] + self._window - now)
        return max(waits) if waits else None

    def failed(self, address: str, user: str) -> None:
        now = self._clock()
        for key in (("address", address), ("user", user.casefold())):
            entry = self._failures.get(key)
            if entry is None:
                entry = self._failures[key] = _Failures()
            self._failures.move_to_end(key)
            entry.times.append(now)
            self._recent(key, now)
        while len(self._failures) > MAX_TRACKED:
            self._failures.popitem(last=False)

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        entry = self._failures.get(key)
        if entry is None:
            return deque()
        while entry.times and entry.times[0] <= now - self._window:
            entry.times.popleft()
        limit = self._limits[key[0]]
        while len(entry.times) > limit:
            entry.times.popleft()
        if not entry.times:
            del self._failures[key]
        return entry.times


# -- where a request comes from -----------------------------------------------------------

LOOPBACK_NAMES = ("localhost",)


def hostname_of(host_header: str) -> str:
    """The name in a Host header (``[::1]:8787`` -> ``::1``, ``localhost:8787`` -> ``localhost``)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_name(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_allowed(host_header: str | None, *, loopback_only: bool) -> bool:
    """A loopback dashboard answers only when the browser asked for a loopback name: a name
    an attacker points at 127.0.0.1 (DNS rebinding) gets nothing."""
    if not host_header:
        return False
    return not loopback_only or is_loopback_name(hostname_of(host_header))


def own_origin(headers: Mapping[str, str], *, tls: bool, behind_proxy: bool) -> str:
    """``scheme://host[:port]`` of the page as the browser sees it."""
    host = headers.get("Host", "")
    scheme = "https" if tls else "http"
    if behind_proxy:
        host = headers.get("X-Forwarded-Host", "").split(",")[0].strip() or host
        scheme = headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower() or scheme
    return f"{scheme}://{host.lower()}"


def _origin_of(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def same_origin(headers: Mapping[str, str], own: str) -> bool:
    """A POST's ``Origin`` (else its ``Referer``) is ``own``; one that names neither is refused
    (every browser sends ``Origin`` with a form's POST)."""
    origin = headers.get("Origin")
    if origin is not None:
        return origin.strip().lower() == own
    referer = headers.get("Referer")
    return referer is not None and _origin_of(referer) == own


def feed_allowed(headers: Mapping[str, str], own: str) -> bool:
    """The live feed (a GET): refused when the browser says another site asks for it."""
    origin = headers.get("Origin")
    if origin is not None and origin.strip().lower() != own:
        return False
    return headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")
