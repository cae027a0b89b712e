"""web_fetch: a public web page's readable text, fetched under an SSRF fence.

Off by default (``tools.web_fetch.enabled``). The fence, hop by hop:

- only ``http`` and ``https`` URLs, without user:password;
- an IP-literal host is checked as it is (``bot.tools.netguard``); legacy numeric hosts
  (``2130706433``, ``127.1``) are refused outright;
- a name is resolved by ``GuardedResolver``, which checks every address the name
  resolves to and refuses the host if any is not public; aiohttp then connects to the
  addresses this resolver returned, and nothing else (no DNS cache, no second lookup),
  so a name cannot pass the check with one answer and connect with another (rebinding);
- redirects are followed by hand (at most ``MAX_REDIRECTS``), each hop through the same
  checks; the environment's proxies are ignored;
- the whole fetch is under ``timeout``, the body under ``max_bytes`` (after decompression),
  the text under ``max_chars``.

``allow_private: true`` lifts the address check (a homelab's own pages). HTML becomes
Markdown-ish text through trafilatura (imported when a page is first extracted), which
keeps the main content and drops menus, footers and scripts.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from bot.config.tools import WebFetchConfig
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.netguard import IPAddress, NotAnAddress, address_refusal, literal_host
from bot.tools.paths import human_size, looks_binary

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
USER_AGENT = "chatgate-web-fetch/0.1 (+https://github.com/chatgate)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "application/ld+json")
_HTML_TYPES = ("text/html", "application/xhtml+xml")

AddressCheck = Callable[[IPAddress], "str | None"]  # None: allowed; else why not


class AddressRefused(ToolError):
    """The URL leads to an address the fence refuses."""


class GuardedResolver(AbstractResolver):
    """Resolves with ``inner`` and returns the addresses only when ``check`` passes every one."""

    def __init__(self, check: AddressCheck, inner: AbstractResolver | None = None) -> None:
        self._check = check
        self._inner = inner or aiohttp.ThreadedResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for entry in found:
            try:
                ip = ipaddress.ip_address(entry["host"])
            except ValueError:
                raise AddressRefused(f"{host} resolved to {entry['host']!r}, which is not an IP address") from None
            if (why := self._check(ip)) is not None:
                raise AddressRefused(f"refused: {host} resolves to {ip}, {why}")
        if not found:
            raise AddressRefused(f"{host} did not resolve to any address")
        return found

    async def close(self) -> None:
        await self._inner.close()


@dataclass(frozen=True, slots=True)
class Page:
    url: str  # after redirects
    status: int
    content_type: str
    charset: str | None
    body: bytes
    cut: bool  # the body went past max_bytes and was cut there


def check_url(url: URL, check: AddressCheck | None) -> None:
    """Scheme, credentials and literal-IP checks of one hop (names are checked when resolved)."""
    if url.scheme not in ("http", "https"):
        raise ToolError(f"web_fetch fetches http and https URLs only, not {url.scheme or 'a relative'} URL {url}")
    if not url.host:
        raise ToolError(f"{url} has no host")
    if url.user or url.password:
        raise ToolError("URLs with a user name or password are not fetched")
    try:
        ip = literal_host(url.host)
    except NotAnAddress:
        raise AddressRefused(f"refused: {url.host} is not a canonical IP address") from None
    if ip is not None and check is not None and (why := check(ip)) is not None:
        raise AddressRefused(f"refused: {ip} is {why}")


async def fetch(url: str, settings: WebFetchConfig, *, check: AddressCheck | None,
                resolver: AbstractResolver | None) -> Page:
    """GET ``url`` under the fence; ``check`` None lifts the address check (``allow_private``)."""
    target = URL(url.strip())
    guard = GuardedResolver(check, resolver) if check is not None else (resolver or aiohttp.ThreadedResolver())
    connector = aiohttp.TCPConnector(resolver=guard, use_dns_cache=False, limit=4)
    headers = {"User-Agent": USER_AGENT, "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"}
    async with asyncio.timeout(settings.timeout), aiohttp.ClientSession(
            connector=connector, headers=headers, trust_env=False,
            timeout=aiohttp.ClientTimeout(total=None)) as session:
        for _ in range(MAX_REDIRECTS + 1):
            check_url(target, check)
            try:
                async with session.get(target, allow_redirects=False) as response:
                    location = response.headers.get("Location")
                    if response.status in _REDIRECTS and location:
                        target = response.url.join(URL(location))
                        log.debug("web_fetch redirect %s -> %s", response.url, target)
                        continue
                    body, cut = await _read_capped(response, settings.max_bytes)
                    return Page(str(response.url), response.status, response.content_type, response.charset,
                                body, cut)
            except aiohttp.ClientConnectorError as exc:
                raise ToolError(f"cannot connect to {target.host}: {exc.os_error.strerror or exc.os_error}") from None
            except aiohttp.InvalidURL as exc:
                raise ToolError(f"not a valid URL: {exc}") from None
            except aiohttp.ClientError as exc:
                raise ToolError(f"fetching {target} failed: {type(exc).__name__}: {exc}") from None
    raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url}; stopped at {target}")


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def page_text(page: Page, max_chars: int) -> str:
    """What the model reads: the URL, the title, the readable text (capped), and notes."""
    kind = page.content_type.lower()
    if kind in _HTML_TYPES or (kind in ("", "application/octet-stream") and page.body.lstrip()[:1] == b"<"):
        title, text = _extract_html(page)
    elif kind.startswith(_TEXT_TYPES) or kind.endswith(("+json", "+xml")) or (
            kind in ("", "application/octet-stream") and not looks_binary(page.body)):
        title, text = None, page.body.decode(page.charset or "utf-8", errors="replace")
    else:
        raise ToolError(f"{page.url} is {kind or 'of an unknown type'} ({human_size(len(page.body))}"
                        f"{' or more' if page.cut else ''}), not a web page or text; web_fetch reads text only")
    head = [f"URL: {page.url}"] + ([f"Title: {title}"] if title else [])
    notes = []
    if page.cut:
        notes.append(f"[the page is over {human_size(len(page.body))}: only its start was read]")
    text = text.strip()
    if len(text) > max_chars:
        notes.append(f"[text cut at {max_chars:,} of {len(text):,} characters]")
        text = text[:max_chars]
    if not text:
        text = "(no readable text on the page)"
    return "\n".join(head) + "\n\n" + text + ("\n\n" + "\n".join(notes) if notes else "")


def _extract_html(page: Page) -> tuple[str | None, str]:
    import trafilatura  # lazy: only deployments that enable web_fetch pay for lxml and friends

    html: Any = page.body.decode(page.charset, errors="replace") if page.charset else page.body
    text = trafilatura.extract(html, url=page.url, output_format="markdown", include_links=True,
                               include_tables=True, include_comments=False, favor_recall=True)
    if not text:  # pages too short or odd for the main-content heuristics: all the visible text
        text = trafilatura.html2txt(html) or ""
    metadata = trafilatura.extract_metadata(html, default_url=page.url)
    return (metadata.title if metadata is not None else None), text


def web_fetch_tool(settings: WebFetchConfig, *, check: AddressCheck | None = None,
                   resolver: AbstractResolver | None = None) -> Tool:
    """The ``web_fetch`` tool under ``settings``. ``check`` replaces the address check
    (tests allow their 127.0.0.1 server with it); ``allow_private`` drops it."""
    address_check: AddressCheck | None = None if settings.allow_private else (check or address_refusal)

    @tool(category=ToolCategory.NETWORK, name="web_fetch")
    async def web_fetch(ctx: ToolContext, url: str) -> str:
        """Fetch a public web page (http or https) and return its readable text as Markdown, with
        its title; long pages are cut. Use it to read a page the user names or you found.

        Args:
            url: The full URL, e.g. `https://example.com/article`.
        """
        try:
            page = await fetch(url, settings, check=address_check, resolver=resolver)
        except AddressRefused as exc:
            log.warning("web_fetch refused %s: %s session=%s run=%s", url, exc, ctx.session_key, ctx.run_id)
            raise
        except TimeoutError:
            raise ToolError(f"fetching {url} took over {settings.timeout:g} s; stopped") from None
        log.info("web_fetch %s -> %s (%d bytes) session=%s run=%s", url, page.status, len(page.body),
                 ctx.session_key, ctx.run_id)
        text = await asyncio.to_thread(page_text, page, settings.max_chars)
        if page.status >= 400:
            raise ToolError(f"{page.url} answered HTTP {page.status}\n\n{text[:1000]}")
        return text

    return web_fetch
