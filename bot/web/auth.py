"""Who is logged in, whether a request may do what it asks, and how often one may try.

- ``Sessions``: a login is a random token in an HttpOnly, SameSite=Strict cookie; the server
  keeps only its SHA-256, with the user, a CSRF token of its own and an expiry. In memory: a
  restart logs everyone out.
- ``LoginLimiter``: failed logins counted per client address (an IPv6 client by its /64)
  and per user name in a sliding window (the class says how); time is injected (``clock``).
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
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from bot.config.binds import is_loopback

Clock = Callable[[], float]

MAX_SESSIONS = 1000  # logins kept at once; the oldest goes first
LOGIN_WINDOW = 900.0  # seconds a failed login counts
MAX_FAILURES = {"address": 5, "user": 10}  # failures in the window, per client address and per user name
STRANGER_EVERY = 60.0  # while a name is under attack: one try a minute from an address not known for it
KNOWN_FOR = 30 * 86400.0  # an address that logged in as a name is known for it this long (in memory)
MAX_TRACKED = 10_000


R = TypeVar("R")  # what a login may do (the dashboard's Role; the web chat's: its person)


@dataclass(slots=True)
class Login(Generic[R]):
    """One logged-in browser."""

    user: str
    role: R
    csrf: str
    expires: float
    flash: str = ""  # one line for the next page (what the last action did)

    def take_flash(self) -> str:
        text, self.flash = self.flash, ""
        return text


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Sessions(Generic[R]):
    def __init__(self, lifetime: float, *, clock: Clock = time.time) -> None:
        self._lifetime = lifetime
        self._clock = clock
        self._logins: OrderedDict[str, Login[R]] = OrderedDict()  # SHA-256 of the cookie -> login

    def open(self, user: str, role: R) -> tuple[str, Login[R]]:
        """A new login: (the cookie's value, the login)."""
        token = secrets.token_urlsafe(32)
        login = Login(user, role, secrets.token_urlsafe(32), self._clock() + self._lifetime)
        self._logins[_digest(token)] = login
        while len(self._logins) > MAX_SESSIONS:
            self._logins.popitem(last=False)
        return token, login

    def get(self, token: str | None) -> Login[R] | None:
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


def csrf_ok(login: Login[Any], sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(login.csrf.encode(), (sent or "").encode("utf-8", "surrogatepass"))


class LoginLimiter:
    """Failed logins, counted per client address and per user name in a sliding window.

    A try is counted as failed when it starts (``attempt``) and taken back when it succeeds
    (``succeeded``): logins in flight count, so many sent at once are not all checked.

    - An address with ``MAX_FAILURES["address"]`` failures waits, whatever name it tries.
    - A name with ``MAX_FAILURES["user"]`` failures from anywhere is under attack: an address
      that failed lately waits; an address that logged in as that name before (``KNOWN_FOR``)
      does not; any other address gets one try for the name every ``STRANGER_EVERY`` seconds.
      So a stranger hammering a name cannot lock its owner out (the owner's address has not
      failed), and a guess spread over many addresses is still slowed down to one a minute.
    """

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._strangers: OrderedDict[str, float] = OrderedDict()  # name -> when an unknown address last tried it
        self._known: OrderedDict[tuple[str, str], float] = OrderedDict()  # (name, address) -> known until

    def attempt(self, address: str, user: str) -> float | None:
        """Seconds until ``address`` may try to log in as ``user``; None: it may now, and the
        try counts as failed until ``succeeded`` says otherwise."""
        now = self._clock()
        source, name = client_key(address), user.casefold()
        mine, theirs = self._recent(("address", source), now), self._recent(("user", name), now)
        if len(mine) >= MAX_FAILURES["address"]:
            return mine[0] + LOGIN_WINDOW - now
        if len(theirs) >= MAX_FAILURES["user"] and self._known.get((name, source), 0.0) <= now:
            name_free = theirs[0] + LOGIN_WINDOW - now
            if mine:  # this address failed lately: it waits while the name is under attack
                return min(name_free, mine[-1] + LOGIN_WINDOW - now)
            turn = self._strangers.get(name, -STRANGER_EVERY) + STRANGER_EVERY - now
            if turn > 0:
                return min(name_free, turn)
            _put(self._strangers, name, now)
        for key in (("address", source), ("user", name)):
            times = self._failures.get(key) or deque()
            times.append(now)
            _put(self._failures, key, times)
        return None

    def succeeded(self, address: str, user: str) -> None:
        """The try ``attempt`` let through was right: it is not a failure, and the address is
        known for the name from now on."""
        now = self._clock()
        source, name = client_key(address), user.casefold()
        for key in (("address", source), ("user", name)):
            times = self._failures.get(key)
            if times:
                times.pop()
        _put(self._known, (name, source), now + KNOWN_FOR)

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - LOGIN_WINDOW:
            times.popleft()
        while len(times) > MAX_FAILURES[key[0]]:
            times.popleft()
        if not times:
            del self._failures[key]
        return times


def _put(table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """``table[key] = value``, newest last, the oldest dropped past ``MAX_TRACKED``."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > MAX_TRACKED:
        table.popitem(last=False)


def client_key(address: str) -> str:
    """What the limits count by: the address, or for IPv6 its /64 (one host may hold all of it)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


# -- where a request comes from -----------------------------------------------------------

def hostname_of(host_header: str) -> str:
    """The name in a Host header (``[::1]:8787`` -> ``::1``, ``localhost:8787`` -> ``localhost``)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_name(name: str) -> bool:
    """``localhost``, a name under ``.localhost`` or a loopback address (``name`` in lower case)."""
    return name.endswith(".localhost") or is_loopback(name)


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
