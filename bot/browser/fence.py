"""The browser's only way out: an HTTP proxy on a Unix socket that checks every address.

Chromium runs in a sandbox without a network (``bot.browser.jail``); inside it a forwarder
(``bot.browser.forward``) hands every connection Chromium makes to its proxy
(``--proxy-server``, loopback included) to this proxy's socket, bound into the sandbox.
Each request is judged here, one by one, the way ``web_fetch`` judges a hop:

- ``CONNECT host:port`` (https, wss): the host is a canonical IP literal checked as it is
  (``bot.tools.netguard``), or a name resolved here, every address it resolves to checked;
  the tunnel is then made to the checked addresses and nothing else (no second lookup), so
  a name cannot pass with one answer and connect with another;
- ``GET http://host/...`` and the other methods in absolute form (plain http, ws, every
  redirect hop, every script's fetch and XHR, every image and frame): the same checks, then
  the request goes on with ``Connection: close`` (the next one comes on a new connection and
  is checked again; a WebSocket upgrade keeps its ``Upgrade``);
- anything else (a bare path, ``ftp:``, a malformed line) is refused.

A refusal answers ``403`` with the reason and is kept (``refusals``) for the tool to tell
the model. ``check`` None lifts the address check (``tools.browser.allow_private``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from bot.tools.netguard import IPAddress, NotAnAddress, address_refusal, literal_host

log = logging.getLogger(__name__)

AddressCheck = Callable[[IPAddress], "str | None"]  # None: allowed; else why not
HEAD_LIMIT = 65_536  # bytes of a request's line and headers
CONNECT_TIMEOUT = 10.0  # seconds to reach the site
MAX_CONNECTIONS = 64  # open at once through one browser's proxy
KEPT_REFUSALS = 20
_HOP_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "connection", "keep-alive", "te", "trailer"})
_CHUNK = 65_536
# Chromium's own background traffic (updates, autofill, network time, safe browsing): refused
# too, but not reported as the page's (its flags turn most of it off; these go on regardless)
BROWSER_OWN = frozenset({"update.googleapis.com", "content-autofill.googleapis.com", "clients1.google.com",
                         "clients2.google.com", "optimizationguide-pa.googleapis.com", "safebrowsing.googleapis.com",
                         "accounts.google.com", "edgedl.me.gvt1.com", "redirector.gvt1.com"})


class Refused(Exception):
    """The request's target is outside the fence (the message says why)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    target: str  # the URL or host:port asked for
    why: str


class FenceProxy:
    """One browser's proxy: serve on ``path`` (``start``), judge every request, ``close``."""

    def __init__(self, check: AddressCheck | None = address_refusal, resolver: AbstractResolver | None = None,
                 *, label: str = "") -> None:
        self._check = check
        self._resolver = resolver or aiohttp.ThreadedResolver()
        self.label = label  # the session, for the log
        self._server: asyncio.base_events.Server | None = None
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._open: set[asyncio.Task[None]] = set()
        self.refusals: deque[Refusal] = deque(maxlen=KEPT_REFUSALS)
        self.requests = 0  # requests let through

    async def start(self, path: str) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=path, limit=HEAD_LIMIT)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        if self._open:
            await asyncio.wait(self._open, timeout=1.0)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    def drop(self) -> None:
        """End every connection now (the run was stopped): the sites see them close."""
        for task in list(self._open):
            task.cancel()

    def take_refusals(self) -> list[Refusal]:
        """The refusals since the last call, oldest first."""
        found = list(self.refusals)
        self.refusals.clear()
        return found

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open.add(task)
        try:
            async with self._slots:
                await self._one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass
        finally:
            self._open.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        line, _, rest = head.partition(b"\r\n")
        parts = line.decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return await _refuse(writer, "a malformed request")
        method, target, version = parts
        if _host_of(method, target) in BROWSER_OWN:
            return await _refuse(writer, "the browser's own background traffic")
        try:
            if method == "CONNECT":
                host, port = _host_port(target)
                addresses = await self.admit(host)
                upstream = await _connect(addresses, port)
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                first = b""
            else:
                url = URL(target)
                if url.scheme != "http" or not url.host or not url.is_absolute():
                    raise Refused(f"{target[:200]} is not an http URL")
                addresses = await self.admit(url.host)
                upstream = await _connect(addresses, url.port or 80)
                first = _forwarded_head(method, url, version, rest)
        except Refused as exc:
            self.refusals.append(Refusal(target[:300], str(exc)))
            log.warning("browser refused %s: %s session=%s", target[:200], exc, self.label)
            return await _refuse(writer, str(exc))
        except (OSError, TimeoutError, ValueError) as exc:
            return await _refuse(writer, f"cannot connect: {exc}", status=b"502 Bad Gateway")
        self.requests += 1
        up_reader, up_writer = upstream
        try:
            if first:
                up_writer.write(first)
            await _splice(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    async def admit(self, host: str) -> list[str]:
        """The addresses ``host`` may be reached at; ``Refused`` when the fence forbids it."""
        try:
            literal = literal_host(host)
        except NotAnAddress:
            raise Refused(f"{host} is not a canonical IP address") from None
        if literal is not None:
            if self._check is not None and (why := self._check(literal)) is not None:
                raise Refused(f"{literal} is {why}")
            return [str(literal)]
        try:
            found = await self._resolver.resolve(host.rstrip(".") or host, 0, socket.AF_UNSPEC)
        except OSError as exc:
            raise Refused(f"{host} did not resolve ({exc.strerror or exc})") from None
        addresses: list[str] = []
        for entry in found:
            try:
                ip = ipaddress.ip_address(entry["host"])
            except ValueError:
                raise Refused(f"{host} resolved to {entry['host']!r}, which is not an IP address") from None
            if self._check is not None and (why := self._check(ip)) is not None:
                raise Refused(f"{host} resolves to {ip}, {why}")
            addresses.append(str(ip))
        if not addresses:
            raise Refused(f"{host} did not resolve to any address")
        return list(dict.fromkeys(addresses))


def _host_of(method: str, target: str) -> str:
    if method == "CONNECT":
        return target.rpartition(":")[0].lower()
    try:
        return (URL(target).host or "").lower()
    except ValueError:
        return ""


def _host_port(target: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise Refused(f"{target[:200]} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


async def _connect(addresses: list[str], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the first of the checked addresses that answers."""
    error: Exception | None = None
    for address in addresses:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                return await asyncio.open_connection(address, port, limit=_CHUNK)
        except (OSError, TimeoutError) as exc:
            error = exc
    raise OSError(str(error) if error else "no address")


def _forwarded_head(method: str, url: URL, version: str, rest: bytes) -> bytes:
    """The request as the site gets it: origin-form, no proxy or hop headers, one request per
    connection (``Connection: close``) unless it is a WebSocket upgrade."""
    lines = [f"{method} {url.raw_path_qs or '/'} {version}".encode("latin-1")]
    upgrade = False
    for raw in rest.split(b"\r\n"):
        if not raw:
            continue
        name = raw.partition(b":")[0].strip().lower().decode("latin-1")
        if name == "upgrade":
            upgrade = True
        if name not in _HOP_HEADERS:
            lines.append(raw)
    lines.append(b"Connection: Upgrade" if upgrade else b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
    """Bytes both ways until the site is done (it closes: one request per connection)."""

    async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(_CHUNK):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass

    outward = asyncio.ensure_future(pump(reader, up_writer))
    inward = asyncio.ensure_future(pump(up_reader, writer))
    try:  # Chromium never half-closes: when it ends its side, the request is over (a page closed)
        await asyncio.wait({inward, outward}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        outward.cancel()
        inward.cancel()


async def _refuse(writer: asyncio.StreamWriter, why: str, status: bytes = b"403 Forbidden") -> None:
    body = f"chatgate refused this request: {why}\n".encode()
    writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()
