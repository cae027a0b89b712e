"""The dashboard's web server: an aiohttp application, its guard, its headers and the login.

    async with Dashboard(settings, store, bot=bot) as dashboard:   # listening on entry
        dashboard.url

Every request passes ``_guard`` first: a Host that is not this page's is refused (a
loopback dashboard answers only to loopback names, so a DNS-rebound site gets nothing),
then everything but the login and the static files needs a login (a GET without one is
sent to the login page, anything else gets 401). A POST must come from this page
(``Origin``, else ``Referer``) and carry the login's CSRF token; the live feed is refused
when the browser says another site asks for it. Every response carries a strict
Content-Security-Policy (scripts, styles and everything else from this origin only; no
inline script or style), no-store, no framing, nosniff; tokens live in an HttpOnly,
SameSite=Strict cookie and in forms, never in a URL, and nothing logs them (aiohttp's
access log is off; the dashboard logs logins and actions itself, without secrets).

The pages and actions are ``bot.dashboard.views``; the live feed is ``views.feed``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.dashboard.assets import ASSETS
from bot.dashboard.live import LiveBoard
from bot.dashboard.pages.login import login_page
from bot.dashboard.reads import Reads
from bot.dashboard.settings import DashboardSettings, Role
from bot.dashboard.sources import Bot, Operations, PeoplePolicy
from bot.dashboard.views import FORM, LOGIN, Views
from bot.errors import ConfigError
from bot.store.base import AppStore
from bot.store.reports import AuditEntry
from bot.tasks import OwnedTasks
from bot.tracing import strip_controls
from bot.web import passwords
from bot.web.auth import (
    LoginLimiter,
    Sessions,
    csrf_ok,
    feed_allowed,
    host_allowed,
    is_loopback_name,
    own_origin,
    same_origin,
)
from bot.web.html import clip, duration
from bot.web.serve import listen

log = logging.getLogger(__name__)

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), interest-cohort=()",
}
MAX_BODY = 64 * 1024  # forms are a few fields
KDF_AT_ONCE = 2  # password checks at once (each takes ~128 MiB for a moment)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Dashboard:
    def __init__(self, settings: DashboardSettings, store: AppStore, *, bot: Bot | None = None,
                 operations: Operations = Operations(), people: PeoplePolicy = PeoplePolicy(),
                 redact: Callable[[str], str] = lambda text: text, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._store = Reads(store)  # the bot's store: the dashboard's own reads run on it
        self._clock = clock
        self.sessions: Sessions[Role] = Sessions(settings.session_hours * 3600, clock=clock)
        self.limiter = LoginLimiter()
        self._kdf = asyncio.Semaphore(KDF_AT_ONCE)
        self.board = LiveBoard(bot) if bot is not None else None
        self._tasks = OwnedTasks()
        self.closing = asyncio.Event()
        self.views = Views(self, self._store, bot, operations, people, redact, self._tasks)
        self._runner: web.AppRunner | None = None
        self._loopback = is_loopback_name(settings.host.lower())
        self._warned = False  # about X-Forwarded-For from a peer that is not a trusted proxy
        self.cookie = "__Host-chatgate" if settings.secure else "chatgate_session"
        self.port = settings.port

    @property
    def url(self) -> str:
        host = f"[{self.settings.host}]" if ":" in self.settings.host else self.settings.host
        return f"{'https' if self.settings.tls else 'http'}://{host}:{self.port}/"

    async def __aenter__(self) -> Dashboard:
        s = self.settings
        if not s.can_log_in():
            raise ConfigError("dashboard.users", "no user has a password, so nobody could log in",
                              "set one with `chatgate dashboard passwd -c CONFIG NAME`")
        context = _tls_context(s) if s.tls else None
        app = web.Application(middlewares=[self._guard], client_max_size=MAX_BODY)
        app.on_response_prepare.append(_secure_headers(s.tls))
        self.views.routes(app)
        app.router.add_get("/login", self._login_form)
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)
        app.router.add_get("/static/{name}", _static)
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        self.port = await listen(runner, s.host, s.port, key="dashboard.bind", shown=s.shown_bind, tls=context)
        self._runner = runner
        if self.board is not None:
            self.board.start()
        self.views.start()
        log.info("dashboard serving %s (%d users)", self.url, sum(1 for u in s.users.values() if u.password_hash))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closing.set()
        if self.board is not None:
            self.board.close()
        await self._tasks.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- every request ------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        s = self.settings
        if not host_allowed(request.headers.get("Host"), loopback_only=self._loopback and not s.behind_proxy):
            return _text(421, "This dashboard answers only to its own address.")
        if request.path == "/login" or request.path.startswith("/static/"):
            if request.method == "POST" and not same_origin(request.headers, self.origin(request)):
                return _text(403, "Refused: this request does not come from the dashboard's own page.")
            return await handler(request)
        login = self.sessions.get(request.cookies.get(self.cookie))
        if login is None:
            if request.method == "GET" and request.path != "/live/events":
                raise web.HTTPSeeOther("/login")
            return _text(401, "Log in first.")
        request[LOGIN] = login
        if request.method == "POST":
            if not same_origin(request.headers, self.origin(request)):
                await self.audit(request, f"post {request.path}", "", "refused: another origin")
                return _text(403, "Refused: this request does not come from the dashboard's own page.")
            form = await request.post()
            if not csrf_ok(login, _field(form, "csrf")):
                await self.audit(request, f"post {request.path}", "", "refused: no valid CSRF token")
                return _text(403, "Refused: the form's token is missing or wrong; reload the page and try again.")
            request[FORM] = {k: v for k, v in form.items() if isinstance(v, str)}
        elif request.path == "/live/events" and not feed_allowed(request.headers, self.origin(request)):
            return _text(403, "Refused: the live feed is for the dashboard's own page.")
        return await handler(request)

    def origin(self, request: web.Request) -> str:
        return own_origin(request.headers, tls=self.settings.tls, behind_proxy=self._via_proxy(request))

    def address(self, request: web.Request) -> str:
        """The client: through a trusted proxy, the last X-Forwarded-For entry that is not a
        trusted proxy itself; else the peer (whatever it says it forwards)."""
        peer = request.remote or ""
        hops = [hop.strip() for line in request.headers.getall("X-Forwarded-For", ()) for hop in line.split(",")]
        hops = [hop for hop in hops if hop]
        if not hops or not self._via_proxy(request):
            return peer
        return next((hop for hop in reversed(hops) if not self._trusted(hop)), hops[0])[:64]

    def _via_proxy(self, request: web.Request) -> bool:
        """``behind_proxy`` and the peer is a trusted proxy: its X-Forwarded-* headers count."""
        if not self.settings.behind_proxy:
            return False
        if self._trusted(request.remote or ""):
            return True
        if not self._warned and "X-Forwarded-For" in request.headers:
            self._warned = True
            log.warning("dashboard: X-Forwarded-For from %s ignored, it is not a trusted proxy "
                        "(dashboard.trusted_proxies)", request.remote)
        return False

    def _trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # a dual-stack socket's view of an IPv4 peer
        return any(ip in network for network in self.settings.trusted_proxies)

    async def audit(self, request: web.Request, action: str, target: str, outcome: str, *, user: str | None = None,
                    role: str | None = None) -> None:
        login = request.get(LOGIN)
        entry = AuditEntry(self._clock(), clip(strip_controls(user if user is not None else
                                                               login.user if login else ""), 64),
                           role if role is not None else str(login.role) if login else "", action,
                           clip(strip_controls(target), 200), outcome, self.address(request))
        log.info("dashboard %s by %r from %s: %s %s", entry.action, entry.user, entry.address, entry.target,
                 entry.outcome)
        try:
            await self._store.record_action(entry)
        except Exception:  # the audit trail is written next to the action; a full disk must not hide the action
            log.exception("dashboard: recording %s failed", action)

    # -- login and logout --------------------------------------------------------------

    async def _login_form(self, request: web.Request) -> web.StreamResponse:
        if self.sessions.get(request.cookies.get(self.cookie)) is not None:
            raise web.HTTPSeeOther("/live")
        return _page(login_page(can_log_in=self.settings.can_log_in()))

    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name = (_field(form, "user") or "").strip()[:64]
        password = (_field(form, "password") or "")[:1024]
        address = self.address(request)
        # a name that is no user's is never written down: it may be a password typed in the wrong field
        shown = name if name in self.settings.users else "(not a user)"
        wait = self.limiter.attempt(address, name)  # counted before the password is checked
        if wait is not None:
            await self.audit(request, "login", "", "refused: too many failed logins", user=shown, role="")
            response = _page(login_page(error=f"Too many failed logins. Try again in {duration(wait)}.", user=name),
                             status=429)
            response.headers["Retry-After"] = str(int(wait) + 1)
            return response
        user = self.settings.users.get(name)
        async with self._kdf:
            if user is None or user.password_hash is None:
                if password:
                    await asyncio.to_thread(passwords.waste_time, password)
                ok = False
            else:
                ok = await asyncio.to_thread(passwords.verify, password, user.password_hash)
        if not ok or user is None:
            await self.audit(request, "login", "", "refused: wrong name or password", user=shown, role="")
            return _page(login_page(error="Wrong name or password.", user=name), status=401)
        self.limiter.succeeded(address, name)
        self.sessions.close(request.cookies.get(self.cookie))  # a login never reuses a cookie
        token, login = self.sessions.open(user.name, user.role)
        request[LOGIN] = login
        await self.audit(request, "login", "", "done")
        response = web.HTTPSeeOther("/live")
        response.set_cookie(self.cookie, token, httponly=True, samesite="Strict", secure=self.settings.secure,
                            path="/")
        raise response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        await self.audit(request, "logout", "", "done")
        self.sessions.close(request.cookies.get(self.cookie))
        response = web.HTTPSeeOther("/login")
        response.del_cookie(self.cookie, path="/", secure=self.settings.secure, httponly=True, samesite="Strict")
        raise response


def _field(form: Any, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", content_type="text/plain")


def _page(body: str, status: int = 200) -> web.Response:
    return web.Response(status=status, text=body, content_type="text/html")


async def _static(request: web.Request) -> web.StreamResponse:
    asset = ASSETS.get(request.match_info["name"])
    if asset is None:
        return _text(404, "Not found.")
    return web.Response(body=asset.body, content_type=asset.content_type,
                        headers={"Cache-Control": "public, max-age=31536000, immutable"})


def _secure_headers(tls: bool) -> Callable[[web.Request, web.StreamResponse], Awaitable[None]]:
    async def add(request: web.Request, response: web.StreamResponse) -> None:
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers["Server"] = "chatgate"  # not aiohttp's version
        if tls:
            response.headers.setdefault("Strict-Transport-Security", "max-age=31536000")

    return add


def _tls_context(s: DashboardSettings) -> ssl.SSLContext:
    assert s.tls_cert is not None and s.tls_key is not None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(s.tls_cert, s.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("dashboard.tls_cert", f"cannot load {s.tls_cert} with {s.tls_key}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return context
