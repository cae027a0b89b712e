"""Which addresses a tool may connect to: public unicast only (the SSRF fence of web_fetch).

``address_refusal(ip)`` is pure: None for a public address, else why not. It refuses loopback,
private (RFC 1918, ULA), shared (CGNAT 100.64/10), link-local, multicast, reserved, unspecified,
documentation and benchmark ranges, anything else that is not global, and the cloud metadata
endpoints; an IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
``::a.b.c.d``, 6to4 ``2002::/16``, Teredo ``2001::/32``, NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``)
is judged by that IPv4 address, since that is where a host routes it (so DNS64 answers for public
sites stay usable). (Python before 3.11.10 and 3.12.4 calls ``::ffff:127.0.0.1`` neither private
nor loopback: the unwrapping here does not depend on it.)

``literal_host(host)`` tells an IP literal from a name the way an HTTP client does, and
refuses the legacy numeric forms (``2130706433``, ``0x7f.1``, ``127.1``) that the C
resolver would turn into an address behind a check's back.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import TypeAlias

IPAddress: TypeAlias = IPv4Address | IPv6Address

METADATA = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean ...
    "169.254.170.2",  # AWS ECS task metadata
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",  # Oracle Cloud
))
_NAT64 = (IPv6Network("64:ff9b::/96"), IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = IPv6Network("::/96")
_NOT_PUBLIC_V4 = (  # beyond what ipaddress calls private (documentation, benchmark, 240/4 ... are)
    (IPv4Network("100.64.0.0/10"), "a shared (carrier-grade NAT) address"),
    (IPv4Network("192.0.0.0/24"), "an IETF protocol address"),
)


def embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address carries, if it is one of the forms that do."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # the client's address (the server's is public by design)
    if any(ip in net for net in _NAT64) or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """None when ``ip`` is a public unicast address a tool may reach; else the reason."""
    if ip in METADATA:
        return "a cloud metadata address"
    if isinstance(ip, IPv6Address):
        if ip.scope_id:
            return "a scoped (link-local) address"
        inner = embedded_ipv4(ip)
        if inner is not None:  # judged by the IPv4 address it reaches (NAT64 of a public site is fine)
            why = address_refusal(inner)
            return None if why is None else f"{why} ({inner} inside {ip})"
    checks = (
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_private, "a private address"),
        (isinstance(ip, IPv6Address) and ip.is_site_local, "a site-local address"),
        (ip.is_reserved, "a reserved address"),
    )
    for failed, why in checks:
        if failed:
            return why
    if isinstance(ip, IPv4Address):
        for net, why in _NOT_PUBLIC_V4:
            if ip in net:
                return why
    if not ip.is_global:
        return "not a public address"
    return None


class NotAnAddress(ValueError):
    """A host that looks numeric (an HTTP client would treat it as an address) but is not a
    canonical IP literal."""


def literal_host(host: str) -> IPAddress | None:
    """The IP address ``host`` is, or None for a name to resolve. ``[v6]`` brackets allowed.

    Raises ``NotAnAddress`` for numeric hosts that are not canonical literals (``127.1``,
    ``2130706433``, ``0x7f000001``, ``017.0.0.1``): resolvers map those onto addresses."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if ":" in bare or bare.rstrip(".").replace(".", "").isdigit() or _hexish(bare):
        raise NotAnAddress(host)
    return None


def _hexish(host: str) -> bool:
    """``0x7f.0.0.1``-style parts: every dotted part numeric in some base."""
    parts = host.rstrip(".").split(".")
    return bool(parts) and all(p[:2].lower() == "0x" and all(c in "0123456789abcdefABCDEF" for c in p[2:])
                               or p.isdigit() for p in parts) and any(p[:2].lower() == "0x" for p in parts)
