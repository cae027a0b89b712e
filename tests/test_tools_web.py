"""web_fetch: the address fence as tables, then real fetches from a test server on 127.0.0.1.

The server is the only address tests may reach, so the allowed path uses an injected
address check that lets exactly 127.0.0.1 through (every other loopback, private or
metadata address stays refused), and names resolve through a test resolver."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, ip_address
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from bot.config.tools import WebFetchConfig
from bot.conversation import Conversation
from bot.llm import ToolCall, ToolResult
from bot.messages import ChatType
from bot.tools import ToolContext, ToolRegistry, builtin_registry
from bot.tools.netguard import IPAddress, NotAnAddress, address_refusal, literal_host
from bot.tools.web import web_fetch_tool
from tests.fakes.llm_server import Call
from tests.fakes.serving import serve
from tests.test_tools_loop import Loop
from tests.test_tools_loop import loop as loop  # noqa: F401  (the fixture)

# -- the pure fence -----------------------------------------------------------------------

REFUSED = [
    ("127.0.0.1", "a loopback address"), ("127.8.9.10", "loopback"), ("10.1.2.3", "a private address"),
    ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("169.254.169.254", "a cloud metadata address"),
    ("169.254.1.1", "a link-local address"), ("100.100.100.200", "metadata"), ("100.64.0.1", "carrier-grade NAT"),
    ("0.0.0.0", "an unspecified address"), ("224.0.0.251", "a multicast address"), ("240.0.0.1", "private"),
    ("255.255.255.255", "private"), ("192.0.2.10", "private"), ("198.18.0.1", "private"), ("192.0.0.9", "IETF protocol"),
    ("::1", "a loopback address"), ("::", "an unspecified address"), ("fe80::1", "link-local"),
    ("fe80::1%eth0", "scoped"), ("fc00::1", "private"), ("fd00:ec2::254", "a cloud metadata address"),
    ("ff02::1", "multicast"), ("fec0::1", "site-local"),
    ("::ffff:127.0.0.1", "a loopback address (127.0.0.1 inside ::ffff:7f00:1)"),
    ("::ffff:169.254.169.254", "metadata"), ("::ffff:10.0.0.1", "private"), ("::127.0.0.1", "loopback"),
    ("2002:7f00:1::", "loopback address (127.0.0.1 inside"), ("2002:a9fe:a9fe::1", "metadata"),
    ("64:ff9b::7f00:1", "loopback"), ("64:ff9b:1::a00:1", "private"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo whose client is 127.0.0.1
]
ALLOWED = ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e",
           "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]


@pytest.mark.parametrize(("address", "why"), REFUSED, ids=[a for a, _ in REFUSED])
def test_refused_addresses(address: str, why: str) -> None:
    refusal = address_refusal(ip_address(address))
    assert refusal is not None and why in refusal, refusal


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ip_address(address)) is None


@pytest.mark.parametrize(("host", "expected"), [
    ("example.com", None), ("localhost", None), ("1.2.3.4", "1.2.3.4"), ("[::1]", "::1"), ("::1", "::1"),
    ("127.1", NotAnAddress), ("2130706433", NotAnAddress), ("0x7f.0.0.1", NotAnAddress), ("017700000001", NotAnAddress),
    ("1.2.3.4.", NotAnAddress), ("[::1", NotAnAddress),
])
def test_literal_hosts(host: str, expected: Any) -> None:
    if expected is NotAnAddress:
        with pytest.raises(NotAnAddress):
            literal_host(host)
    else:
        assert literal_host(host) == (ip_address(expected) if expected else None)


# -- a test server, a test resolver -------------------------------------------------------

ARTICLE = """<!doctype html><html><head><title>Fox news</title><script>var tracking = 1;</script>
<style>body{color:red}</style></head><body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>The quick brown fox</h1>
<p>The quick brown fox jumps over the lazy dog, and this paragraph is long enough to be the main content
of the page, which the extractor must keep while it drops the menu, the script and the footer.</p>
<p>A second paragraph with <a href="/more">a link to more</a> and some more words about foxes.</p>
</article><footer>Copyright 2026 Fox Inc. All rights reserved.</footer></body></html>"""


@dataclass
class Site:
    port: int
    hits: list[str] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    state = Site(0)

    async def article(request: web.Request) -> web.Response:
        return web.Response(text=ARTICLE, content_type="text/html", charset="utf-8")

    async def plain(request: web.Request) -> web.Response:
        return web.Response(text="just some text\n", content_type="text/plain")

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def loop_(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        for _ in range(100):
            await response.write(b"word " * 2000)  # 10 kB a chunk, 1 MB in all
        return response

    async def bomb(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(b"a" * 5_000_000), headers={
            "Content-Type": "text/plain", "Content-Encoding": "gzip"})

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.Response(text="late")

    async def png(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n\x1a\n" + bytes(100), content_type="image/png")

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="<html><body><p>No such page here.</p></body></html>",
                            content_type="text/html")

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        state.hits.append(f"{request.host} {request.path_qs}")
        return await handler(request)

    app = web.Application(middlewares=[record])
    app.add_routes([web.get("/article", article), web.get("/plain", plain), web.get("/redirect", redirect),
                    web.get("/loop", loop_), web.get("/big", big), web.get("/bomb", bomb), web.get("/slow", slow),
                    web.get("/image.png", png), web.get("/missing", missing)])
    runner, state.port = await serve(app, "127.0.0.1", 0)
    try:
        yield state
    finally:
        await runner.cleanup()


class MapResolver(AbstractResolver):
    """Names to addresses from a table, as a DNS server would answer."""

    def __init__(self, table: Mapping[str, tuple[str, ...]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(-2, "Name or service not known")
        return [{"hostname": host, "host": a, "port": port, "family": socket.AF_INET6 if ":" in a else socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST} for a in self.table[host]]

    async def close(self) -> None:
        return None


DNS = {"site.test": ("127.0.0.1",), "evil.test": ("127.0.0.1",), "meta.test": ("169.254.169.254",),
       "inside.test": ("10.0.0.7",), "mixed.test": ("127.0.0.1", "10.0.0.7"), "v6.test": ("::1",),
       "mapped.test": ("::ffff:127.0.0.1",)}


def only_the_test_server(ip: IPAddress) -> str | None:
    """The real check, with one hole: 127.0.0.1, where the test server is."""
    return None if ip == IPv4Address("127.0.0.1") else address_refusal(ip)


def registry(resolver: AbstractResolver | None = None, *, hole: bool = True, **settings: Any) -> ToolRegistry:
    tools = builtin_registry()
    check = only_the_test_server if hole else None
    tools.register(web_fetch_tool(WebFetchConfig(**settings), check=check, resolver=resolver))
    return tools


async def fetch(tools: ToolRegistry, url: str) -> ToolResult:
    ctx = ToolContext(Path("."), Conversation.of_key("agent:main:test:dm:u"), "r", "main", "u")
    [result] = await tools.execute([ToolCall("c1", "web_fetch", json.dumps({"url": url}))], ctx)
    return result


# -- refusals: nothing reaches the server ------------------------------------------------

@pytest.mark.parametrize(("url", "why"), [
    ("http://127.0.0.2:{port}/plain", "refused: 127.0.0.2 is a loopback address"),
    ("http://10.0.0.1/", "refused: 10.0.0.1 is a private address"),
    ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
    ("http://[::1]:{port}/plain", "refused: ::1 is a loopback address"),
    ("http://[::ffff:127.0.0.1]:{port}/plain", "a loopback address (127.0.0.1 inside"),
    ("http://[::ffff:7f00:1]:{port}/plain", "a loopback address"),
    ("http://[fd00:ec2::254]/latest", "a cloud metadata address"),
    ("http://[64:ff9b::a9fe:a9fe]/", "a cloud metadata address"),
    ("http://2130706433:{port}/plain", "is not a canonical IP address"),
    ("http://127.1:{port}/plain", "is not a canonical IP address"),
    ("http://0x7f.0.0.1:{port}/plain", "is not a canonical IP address"),
    ("http://evil.test:{port}/plain", "refused: evil.test resolves to 127.0.0.1, a loopback address"),
    ("http://meta.test/", "refused: meta.test resolves to 169.254.169.254, a cloud metadata address"),
    ("http://mixed.test:{port}/plain", "refused: mixed.test resolves to 127.0.0.1, a loopback address"),
    ("http://v6.test:{port}/plain", "refused: v6.test resolves to ::1"),
    ("http://mapped.test:{port}/plain", "refused: mapped.test resolves to ::ffff:7f00:1, a loopback address"),
    ("file:///etc/passwd", "http and https URLs only"),
    ("ftp://example.com/x", "http and https URLs only"),
    ("http://user:pw@site.test:{port}/plain", "user name or password"),
    ("not a url", "http and https URLs only"),
])
async def test_refusals_never_connect(site: Site, url: str, why: str) -> None:
    tools = registry(MapResolver(DNS), hole=False)
    result = await fetch(tools, url.format(port=site.port))
    assert result.is_error and why in result.content, result.content
    assert site.hits == []


async def test_a_name_resolving_to_loopback_is_refused_even_with_the_test_hole_for_others(site: Site) -> None:
    # with the hole, 127.0.0.1 is reachable by name; any other private answer is still refused
    tools = registry(MapResolver(DNS))
    assert not (await fetch(tools, site.url("/plain", "site.test"))).is_error
    refused = await fetch(tools, site.url("/plain", "inside.test"))
    assert refused.is_error and "10.0.0.7, a private address" in refused.content
    mixed = await fetch(tools, site.url("/plain", "mixed.test"))  # one good answer does not excuse a bad one
    assert mixed.is_error and "mixed.test resolves to 10.0.0.7, a private address" in mixed.content
    assert site.hits == ["site.test:%d /plain" % site.port]


@pytest.mark.parametrize(("target", "why"), [
    ("http://127.0.0.2:{port}/plain", "refused: 127.0.0.2 is a loopback address"),
    ("http://[::1]:{port}/plain", "refused: ::1 is a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
    ("http://inside.test/admin", "refused: inside.test resolves to 10.0.0.7, a private address"),
    ("http://[::ffff:10.0.0.1]/", "a private address"),
    ("gopher://127.0.0.1:{port}/", "http and https URLs only"),
])
async def test_a_redirect_to_a_private_address_is_refused(site: Site, target: str, why: str) -> None:
    tools = registry(MapResolver(DNS))
    to = target.format(port=site.port)
    result = await fetch(tools, site.url(f"/redirect?to={to}", "site.test"))
    assert result.is_error and why in result.content, result.content
    assert len(site.hits) == 1 and site.hits[0].startswith(f"site.test:{site.port} /redirect?to=")  # 1st hop only


async def test_redirects_are_followed_and_capped(site: Site) -> None:
    tools = registry(MapResolver(DNS))
    result = await fetch(tools, site.url("/redirect?to=/plain", "site.test"))
    assert result.content == f"URL: http://site.test:{site.port}/plain\n\njust some text"
    looping = await fetch(tools, site.url("/loop", "site.test"))
    assert looping.is_error and "more than 5 redirects" in looping.content and len(site.hits) == 2 + 6


# -- what comes back ----------------------------------------------------------------------

async def test_html_becomes_readable_text(site: Site) -> None:
    result = await fetch(registry(MapResolver(DNS)), site.url("/article", "site.test"))
    assert not result.is_error, result.content
    text = result.content
    assert text.startswith(f"URL: http://site.test:{site.port}/article\nTitle: ")
    assert "The quick brown fox jumps over the lazy dog" in text and "second paragraph" in text.lower()
    assert f"[a link to more](http://site.test:{site.port}/more)" in text
    for noise in ("var tracking", "color:red", "Copyright 2026", "About"):
        assert noise not in text


async def test_size_caps_and_text_cap(site: Site) -> None:
    tools = registry(MapResolver(DNS), max_bytes=20_000, max_chars=1_000)
    result = await fetch(tools, site.url("/big", "site.test"))
    assert not result.is_error
    assert "[the page is over 19.5 KB: only its start was read]" in result.content
    assert "[text cut at 1,000 of 19,999 characters]" in result.content
    bomb = await fetch(tools, site.url("/bomb", "site.test"))  # 5 MB of gzip-compressed "a": cut after inflating
    assert "only its start was read" in bomb.content


async def test_timeout(site: Site) -> None:
    tools = registry(MapResolver(DNS), timeout=0.3)
    started = asyncio.get_running_loop().time()
    result = await fetch(tools, site.url("/slow", "site.test"))
    assert result.is_error and "took over 0.3 s; stopped" in result.content
    assert asyncio.get_running_loop().time() - started < 2


async def test_binary_errors_and_unknown_names(site: Site) -> None:
    tools = registry(MapResolver(DNS))
    image = await fetch(tools, site.url("/image.png", "site.test"))
    assert image.is_error and "is image/png (108 B), not a web page or text" in image.content
    missing = await fetch(tools, site.url("/missing", "site.test"))
    assert missing.is_error and "answered HTTP 404" in missing.content and "No such page here." in missing.content
    unknown = await fetch(tools, "http://nowhere.test/")
    assert unknown.is_error and "cannot connect to nowhere.test" in unknown.content


async def test_allow_private_lifts_the_address_check(site: Site) -> None:
    tools = builtin_registry(web_fetch=WebFetchConfig(allow_private=True))
    result = await fetch(tools, site.url("/plain"))
    assert result.content == f"URL: {site.url('/plain')}\n\njust some text"
    closed = builtin_registry(web_fetch=WebFetchConfig())
    refused = await fetch(closed, site.url("/plain"))
    assert refused.is_error and "refused: 127.0.0.1 is a loopback address" in refused.content


# -- through the agent loop ---------------------------------------------------------------

async def test_web_fetch_through_the_loop(loop: Loop, site: Site) -> None:  # noqa: F811
    tools = registry(MapResolver(DNS))
    result, [page, refused] = await loop.run(
        Call("web_fetch", {"url": site.url("/article", "site.test")}, id="ok"),
        Call("web_fetch", {"url": site.url("/redirect?to=http://169.254.169.254/", "site.test")}, id="ssrf"),
        tools=tools, chat_type=ChatType.GROUP)
    assert result.text == "done"
    assert "The quick brown fox jumps" in page.content and not page.is_error
    assert refused.is_error and "a cloud metadata address" in refused.content
    assert "jumps over the lazy dog" in str(loop.llm.requests[1].body)  # the model read the page


class Rebinding(MapResolver):
    """Answers 127.0.0.1 the first time it is asked about a name, then an inside address."""

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        first = host not in self.asked
        [entry] = await super().resolve(host, port, family)
        return [{**entry, "host": "127.0.0.1" if first else "10.0.0.7"}]


async def test_the_checked_answer_is_the_one_connected_to(site: Site) -> None:
    """One lookup per hop, and the connection goes to what it answered: a name the system
    cannot resolve (site.test) is reached, and a rebinding second answer is never used."""
    resolver = Rebinding(DNS)
    tools = registry(resolver)
    first = await fetch(tools, site.url("/plain", "site.test"))
    assert not first.is_error and resolver.asked == ["site.test"]
    second = await fetch(tools, site.url("/plain", "site.test"))  # no cache: asked again, and refused
    assert second.is_error and "site.test resolves to 10.0.0.7" in second.content
    assert resolver.asked == ["site.test", "site.test"] and len(site.hits) == 1
