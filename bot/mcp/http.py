"""The HTTP client of a streamable-HTTP MCP server, behind the same address fence as ``web_fetch``.

The SDK speaks HTTP through an ``httpx2`` client we hand it. Unless the server has
``allow_private: true``, that client's connections go through ``GuardedBackend``: the host is
resolved here, every address it resolves to is checked (``bot.tools.netguard``: public
unicast only, no loopback, private, link-local or cloud-metadata address), and the socket is
opened to one of those checked addresses, never to a second lookup of the name (DNS
rebinding). An IP-literal host is checked as it is; the legacy numeric forms (``127.1``)
are refused. TLS still verifies the certificate for the name in the URL. Proxies from the
environment are not used (a proxy would make the fence moot).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore2
import httpx2

from bot.tools.netguard import IPAddress, NotAnAddress, address_refusal, literal_host


class AddressRefused(httpcore2.ConnectError):
    """The server's address is not a public one (and ``allow_private`` is off)."""


async def checked_addresses(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` may be reached at; raises ``AddressRefused`` naming why not."""
    try:
        literal = literal_host(host)
    except NotAnAddress:
        raise AddressRefused(f"refused: {host} is not a canonical IP address") from None
    if literal is not None:
        found = [literal]
    else:
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore2.ConnectError(f"{host} did not resolve: {exc}") from exc
        found = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    if not found:
        raise AddressRefused(f"{host} did not resolve to any address")
    for ip in found:
        if (why := address_refusal(ip)) is not None:
            raise AddressRefused(f"refused: {host} is {ip}, {why} (set allow_private: true for a server "
                                 f"on your own network)")
    return found


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Opens TCP connections only to checked public addresses (see the module doc)."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        problem: Exception | None = None
        for ip in await checked_addresses(host, port):
            try:
                return await self._inner.connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                problem = exc
        assert problem is not None
        raise problem

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise AddressRefused("unix sockets are not used for MCP servers")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def http_client(headers: dict[str, str], *, connect_timeout: float, read_timeout: float,
                allow_private: bool) -> httpx2.AsyncClient:
    """The client for one server: its headers, no proxy from the environment, the fence."""
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    if not allow_private:
        # the transport builds its pool with the default backend; this one is the same pool
        # with the fence as its network backend (httpx2 takes no backend as an argument)
        transport._pool = httpcore2.AsyncConnectionPool(ssl_context=httpx2.create_ssl_context(trust_env=False),
                                                        network_backend=GuardedBackend())
    timeout = httpx2.Timeout(connect_timeout, read=read_timeout)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport, trust_env=False)
