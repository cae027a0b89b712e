"""The browser tool for real: Debian's Chromium in its bubblewrap sandbox, driven by Playwright,
against fake sites on 127.0.0.1 (tests/fakes/sites.py), through the tool registry.

The fake sites are on 127.0.0.1, the one address tests may reach: the fence is on with one
hole, 127.0.0.1 (every other loopback, private, link-local and metadata address stays
refused), and names resolve through a table (tests/test_tools_web.py's ``MapResolver``), so
"a name that resolves to a private address" is proven with the real check."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from bot.browser.browsers import Browsers
from bot.browser.config import BrowserSettings
from bot.browser.tool import browser_tool
from bot.config.tools import ExecLimitsConfig
from bot.conversation import Conversation
from bot.llm import ToolCall
from bot.tools.base import ToolContext
from bot.tools.netguard import IPAddress, address_refusal
from bot.tools.registry import ToolRegistry
from bot.tools.sandbox import ExecSettings
from tests.fakes.sites import Sites, serving
from tests.test_tools_web import MapResolver

CHROMIUM = Path("/usr/bin/chromium")
REQUIRED = os.environ.get("CHATGATE_REQUIRE_BROWSER") == "1"
pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(not REQUIRED and (not CHROMIUM.exists() or shutil.which("bwrap") is None),
                                 reason="no Chromium or bubblewrap (apt-get install chromium bubblewrap)")]
if not REQUIRED:
    pytest.importorskip("playwright.async_api", reason="Playwright is not installed: pip install -e '.[browser]'")

DNS = {"site.test": ("127.0.0.1",), "inside.test": ("10.0.0.7",), "meta.test": ("169.254.169.254",),
       "loop.test": ("127.0.0.2",)}


def only_the_sites(ip: IPAddress) -> str | None:
    """The real check, with one hole: 127.0.0.1, where the fake sites are."""
    return None if ip == IPv4Address("127.0.0.1") else address_refusal(ip)


class Bed:
    def __init__(self, root: Path, sites: Sites, browsers: Browsers) -> None:
        self.root, self.sites, self.browsers = root, sites, browsers
        self.tools = ToolRegistry()
        self.tools.register(browser_tool(browsers))

    def workspace(self, who: str) -> Path:
        path = self.root / "workspaces" / who
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def call(self, who: str = "alice", **arguments: Any) -> Any:
        ctx = ToolContext(self.workspace(who), Conversation.of_key(f"agent:main:test:dm:{who}"), f"run-{who}",
                          "main", who)
        [result] = await self.tools.execute([ToolCall("c1", "browser", json.dumps(arguments))], ctx)
        return result


def settings(**changes: Any) -> BrowserSettings:
    world = ExecSettings(limits=ExecLimitsConfig(memory_mb=changes.pop("memory_mb", 1024)))
    return BrowserSettings(action_timeout=changes.pop("action_timeout", 20.0), sandbox=world, **changes)


@pytest.fixture
async def bed(tmp_path: Path) -> AsyncIterator[Bed]:
    async with serving() as sites:
        browsers = Browsers(settings(), check=only_the_sites, resolver=MapResolver(DNS))
        try:
            yield Bed(tmp_path, sites, browsers)
        finally:
            await browsers.aclose()


async def test_a_page_that_needs_javascript_is_read_and_a_form_is_submitted(bed: Bed) -> None:
    page = await bed.call(action="open", url=bed.sites.url("/js"))
    assert not page.is_error, page.content
    assert "Written by JavaScript: 42 apples" in page.content
    form = await bed.call(action="open", url=bed.sites.url("/form", "site.test"))
    assert 'textbox "Name" [1]' in form.content and 'combobox "Size" [2]' in form.content, form.content
    assert 'button "Send order" [3]' in form.content
    assert not (await bed.call(action="type", ref=1, text="Ada")).is_error
    assert not (await bed.call(action="select", ref=2, text="large")).is_error
    done = await bed.call(action="click", ref=3)
    assert "Order received for Ada, size large" in done.content, done.content
    assert bed.sites.posted == [{"name": "Ada", "size": "large"}]


async def test_snapshot_references_are_clicked_and_back_returns(bed: Bed) -> None:
    links = await bed.call(action="open", url=bed.sites.url("/links"))
    assert 'link "First page" [1]' in links.content and 'link "Second page" [2]' in links.content, links.content
    second = await bed.call(action="click", ref=2)
    assert "This is page two." in second.content
    back = await bed.call(action="back")
    assert "Pick one:" in back.content
    missing = await bed.call(action="click", ref=9)
    assert missing.is_error and "no element [9]" in missing.content


async def test_a_download_lands_in_the_workspace_and_nowhere_else(bed: Bed) -> None:
    await bed.call(action="open", url=bed.sites.url("/getfile"))
    clicked = await bed.call(action="click", ref=1)
    assert "downloaded downloads/report.csv" in clicked.content, clicked.content
    downloads = bed.workspace("alice") / "downloads"
    assert [p.name for p in downloads.iterdir()] == ["report.csv"]
    assert (downloads / "report.csv").read_bytes() == b"a,b\n1,2\n"
    others = [p for p in bed.root.rglob("*") if p.is_file() and p.name != "report.csv"]
    assert others == []  # nothing else written beside the workspace's downloads/


@pytest.mark.parametrize(("target", "why"), [
    ("http://127.0.0.2:{port}/page/x", "a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
    ("http://10.1.2.3/", "a private address"),
    ("http://meta.test/", "meta.test resolves to 169.254.169.254, a cloud metadata address"),
    ("http://inside.test:{port}/", "inside.test resolves to 10.0.0.7, a private address"),
    ("http://loop.test:{port}/", "loop.test resolves to 127.0.0.2, a loopback address"),
])
async def test_a_redirect_to_a_private_address_is_refused(bed: Bed, target: str, why: str) -> None:
    hop = target.format(port=bed.sites.port)
    result = await bed.call(action="open", url=bed.sites.url(f"/redirect?to={hop}"))
    assert why in result.content, result.content
    assert "chatgate refused this request" in result.content or result.is_error
    assert bed.sites.hits == [f"/redirect?to={hop}"]  # the redirect only: nothing reached through it


async def test_opening_a_private_address_directly_is_refused(bed: Bed) -> None:
    result = await bed.call(action="open", url="http://127.0.0.2:8080/")
    assert "127.0.0.2 is a loopback address" in result.content, result.content


async def test_a_script_fetching_a_private_address_is_blocked(bed: Bed) -> None:
    target = f"http://loop.test:{bed.sites.port}/secret"
    await bed.call(action="open", url=bed.sites.url(f"/fetch?to={target}"))
    shown = await bed.call(action="wait", text="FAILED")
    assert "FAILED" in shown.content and "the internal secret" not in shown.content, shown.content
    assert "/secret" not in bed.sites.hits
    allowed = await bed.call(action="open", url=bed.sites.url(f"/fetch?to={bed.sites.url('/secret')}"))
    assert "GOT: the internal secret" in (await bed.call(action="wait", text="GOT")).content, allowed.content


async def test_file_chrome_and_data_addresses_are_refused_and_the_page_cannot_read_files(bed: Bed) -> None:
    for url in ("file:///etc/passwd", "chrome://settings", "data:text/html,<p>hi</p>", "javascript:alert(1)"):
        result = await bed.call(action="open", url=url)
        assert result.is_error and "only http and https" in result.content, (url, result.content)
    await bed.call(action="open", url=bed.sites.url("/file"))
    shown = await bed.call(action="wait", text="NO FILE")
    assert "NO FILE" in shown.content and "root:" not in shown.content
    clicked = await bed.call(action="click", ref=1)
    assert "root:" not in clicked.content and "/etc/passwd" not in clicked.content.split("\n", 1)[0]


async def test_the_browser_sees_no_bot_file(bed: Bed, tmp_path: Path) -> None:
    """The sandbox's world, read from inside (the sandbox's pid 1 on the host: /proc/PID/root)."""
    secret = bed.root / "config.yaml"
    secret.write_text("token: s3cret")
    browsers = Browsers(BrowserSettings(sandbox=ExecSettings(private=(secret, bed.root / "workspaces"))),
                        check=only_the_sites)
    try:
        tools = ToolRegistry()
        tools.register(browser_tool(browsers))
        ctx = ToolContext(bed.workspace("alice"), Conversation.of_key("agent:main:test:dm:alice"), "r", "main", "alice")
        [opened] = await tools.execute([ToolCall("c", "browser", json.dumps({"action": "open",
                                                                               "url": bed.sites.url("/js")}))], ctx)
        assert not opened.is_error, opened.content
        session = browsers.get("agent:main:test:dm:alice")
        assert session is not None and session.jail.pid is not None
        inside = Path(f"/proc/{session.jail.pid}/root")
        assert not (inside / str(secret).lstrip("/")).exists()
        assert not (inside / str(Path(__file__).parent.parent / "bot").lstrip("/")).exists()  # no bot code
        assert not (inside / "etc" / "shadow").exists()  # /etc: an allowlist only
        listed = {p.name for p in (inside / str(bed.workspace("alice")).lstrip("/")).iterdir()}
        assert listed <= {"downloads"}, listed  # of the workspace: downloads/ only
        environ = Path(f"/proc/{session.jail.pid}/environ").read_bytes().split(b"\0")
        assert not any(b"TOKEN" in e or b"KEY" in e for e in environ)
    finally:
        await browsers.aclose()


async def test_two_peoples_contexts_never_share_cookies(bed: Bed) -> None:
    await bed.call("alice", action="open", url=bed.sites.url("/cookie/set?v=alice"))
    assert "cookie is alice" in (await bed.call("alice", action="open", url=bed.sites.url("/cookie/show"))).content
    bob = await bed.call("bob", action="open", url=bed.sites.url("/cookie/show"))
    assert "cookie is none" in bob.content, bob.content
    assert len(bed.browsers.open_sessions) == 2


async def test_stop_during_a_slow_page_closes_it(bed: Bed) -> None:
    ctx = ToolContext(bed.workspace("alice"), Conversation.of_key("agent:main:test:dm:alice"), "r", "main", "alice")
    call = asyncio.ensure_future(bed.tools.execute(
        [ToolCall("c", "browser", json.dumps({"action": "open", "url": bed.sites.url("/slow")}))], ctx))
    while bed.sites.slow_hits == 0:
        await asyncio.sleep(0.02)
    call.cancel()  # what /stop does to the run's task
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(bed.sites.slow_gone.wait(), 10)  # the page went: its connection closed
    session = bed.browsers.get("agent:main:test:dm:alice")
    assert session is not None and session.pages == []
    again = await bed.call(action="open", url=bed.sites.url("/js"))  # the browser goes on
    assert "42 apples" in again.content


async def test_a_page_that_allocates_without_end_is_stopped_and_the_browser_goes_on(tmp_path: Path) -> None:
    async with serving() as sites:
        browsers = Browsers(settings(memory_mb=600, action_timeout=15.0), check=only_the_sites)
        bed = Bed(tmp_path, sites, browsers)
        try:
            await bed.call(action="open", url=sites.url("/hog"))
            for _ in range(30):
                result = await bed.call(action="snapshot")
                if "crashed" in result.content or result.is_error:
                    break
                await asyncio.sleep(0.5)
            assert "crashed" in result.content or result.is_error, result.content
            after = await bed.call(action="open", url=sites.url("/js"), new_tab=True)
            assert not after.is_error, after.content
            assert "42 apples" in (await bed.call(action="wait", text="42 apples")).content
        finally:
            await browsers.aclose()


async def test_pages_and_sessions_are_bounded(tmp_path: Path) -> None:
    async with serving() as sites:
        browsers = Browsers(settings(max_pages=2, max_sessions=1), check=only_the_sites)
        bed = Bed(tmp_path, sites, browsers)
        try:
            await bed.call(action="open", url=sites.url("/js"))
            await bed.call(action="open", url=sites.url("/links"), new_tab=True)
            third = await bed.call(action="open", url=sites.url("/form"), new_tab=True)
            assert third.is_error and "2 pages are open" in third.content
            await bed.call("bob", action="open", url=sites.url("/js"))  # alice's idle browser makes room
            assert browsers.open_sessions == ("agent:main:test:dm:bob",)
        finally:
            await browsers.aclose()


async def test_an_idle_browser_is_closed(tmp_path: Path) -> None:
    async with serving() as sites:
        browsers = Browsers(settings(idle_timeout=0.3), check=only_the_sites)
        bed = Bed(tmp_path, sites, browsers)
        try:
            await bed.call(action="open", url=sites.url("/js"))
            pid = browsers.get("agent:main:test:dm:alice").jail.pid  # type: ignore[union-attr]
            for _ in range(100):
                if not browsers.open_sessions and not _alive(pid):
                    break
                await asyncio.sleep(0.1)
            assert browsers.open_sessions == ()
            assert not _alive(pid)  # the sandbox is gone
        finally:
            await browsers.aclose()


def _alive(pid: int | None) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        return False


async def test_a_screenshot_is_shown_to_the_model_and_saved(bed: Bed) -> None:
    await bed.call(action="open", url=bed.sites.url("/js"))
    ctx = ToolContext(bed.workspace("alice"), Conversation.of_key("agent:main:test:dm:alice"), "r", "main", "alice")
    images: dict[str, Any] = {}
    [result] = await bed.tools.execute([ToolCall("s", "browser", json.dumps({"action": "screenshot"}))], ctx,
                                       images=images)
    assert not result.is_error, result.content
    [image] = images["s"]
    assert image.media_type == "image/jpeg"
    [saved] = (bed.workspace("alice") / "screenshots").iterdir()
    assert saved.read_bytes()[:2] == b"\xff\xd8" and f"screenshots/{saved.name}" in result.content


async def test_page_text_that_looks_like_instructions_is_flagged(bed: Bed) -> None:
    result = await bed.call(action="open", url=bed.sites.url("/inject"))
    assert result.content.startswith("[The input guard flagged"), result.content


def test_the_browser_asks_non_owners_by_default_as_exec_does() -> None:
    from bot.tools.approval import ApprovalRules

    rules = ApprovalRules()
    assert rules.needs("browser", is_owner=False) and not rules.needs("browser", is_owner=True)
    assert rules.needs("exec", is_owner=False) and not rules.needs("web_fetch", is_owner=False)
