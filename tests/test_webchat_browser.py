"""The web chat in headless Chromium (Debian's ``chromium`` through Playwright) against ``chatgate
run`` with the fake LLM: sign in by a one-time link, a streamed answer, ``<script>`` in a
message and in the model's answer shown as text, an approval pressed, a file uploaded and one
received, Stop, a forged POST refused, and screenshots at 1280x800 and 390 px wide (kept in
``CHATGATE_SCREENSHOTS`` or the test's folder)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.test_api_e2e import Bot, free_port

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}")]


class WebBot(Bot):
    def __init__(self, tmp: Path, llm: FakeLLM) -> None:
        super().__init__(tmp, llm)
        self.web_port = free_port()

    def write_web(self) -> None:
        self.write(extra={"webchat": {"enabled": True, "bind": f"127.0.0.1:{self.web_port}"},
                          "tools": {"approval": {"write_file": "ask"}, "approval_timeout": 30}})

    @property
    def web(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    async def invite(self, person: str) -> str:
        code, out = await self.cli("webchat", "invite", person)
        assert code == 0, out
        return out.strip().splitlines()[-1]


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[tuple[WebBot, FakeLLM]]:
    async with FakeLLM() as llm:
        b = WebBot(tmp_path, llm)
        b.write_web()
        try:
            yield b, llm
        finally:
            await b.close()


def shots() -> Path:
    folder = Path(os.environ.get("CHATGATE_SCREENSHOTS", "/tmp/chatgate-webchat-shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def test_the_web_chat_in_a_browser(web: tuple[WebBot, FakeLLM], tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    bot, llm = web
    link = await bot.invite("alice")
    await bot.start()
    while True:  # the web chat listens too
        try:
            _, w = await asyncio.open_connection("127.0.0.1", bot.web_port)
            w.close()
            break
        except OSError:
            await asyncio.sleep(0.05)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 800}, accept_downloads=True)
            await page.goto(link)
            await page.click("text=Sign in")
            await page.wait_for_selector("#composer")
            cookies = await page.context.cookies()
            cookie = next(c for c in cookies if c["name"] == "chatgate_web")
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            again = await browser.new_page()
            await again.goto(link)  # the link works once
            await again.click("text=Sign in")
            assert "used already" in await again.content()
            await again.close()

            # a streamed answer; <script> in the message and in the answer shown as text
            llm.script(Reply.text("Here is **bold** and <script>window.pwned=1</script> text.", chunk_size=4,
                                  delay=0.03))
            await page.fill("#text", "hello <script>window.mine=1</script>")
            await page.press("#text", "Enter")
            await page.wait_for_selector(".msg.assistant strong")
            assert await page.evaluate("window.pwned === undefined && window.mine === undefined")
            assert "<script>window.mine=1</script>" in await page.inner_text(".msg.user")
            answer = page.locator(".msg.assistant").last
            assert "<script>window.pwned=1</script>" in await answer.inner_text()
            assert await page.locator(".msg.assistant script").count() == 0

            # a file up: saved in the workspace's inbox, given to the model
            await page.set_input_files("#file", files=[{"name": "notes.txt", "mimeType": "text/plain",
                                                         "buffer": b"the uploaded notes"}])
            await page.wait_for_selector("#attached:has-text('notes.txt')")
            # an approval pressed: write_file asks; then send_file gives a file down
            llm.script(Reply.tool_calls([Call("write_file", {"path": "out.txt", "content": "made for you"},
                                              id="c1")]),
                       Reply.tool_calls([Call("send_file", {"path": "out.txt"}, id="c2")]),
                       Reply.text("Done: written and sent."))
            await page.fill("#text", "write it and send it")
            await page.press("#text", "Enter")
            await page.wait_for_selector(".msg.ask .choices button")
            await page.screenshot(path=str(shots() / "webchat-1280-approval.png"))
            await page.locator(".msg.ask .choices button").first.click()
            await page.wait_for_selector(".msg.file a")
            async with page.expect_download() as download_info:
                await page.locator(".msg.file a").first.click()
            download = await download_info.value
            assert Path(await download.path()).read_bytes() == b"made for you"
            await page.wait_for_selector(".msg.assistant:has-text('written and sent')")
            inbox = bot.tmp / "workspaces" / "alice" / "inbox"
            assert (inbox / "notes.txt").read_bytes() == b"the uploaded notes"
            assert any("inbox/notes.txt" in str(r.body) for r in llm.requests)

            # Stop: the run ends and the fake LLM's stream is closed
            llm.script(Reply.text("word " * 400, chunk_size=5, delay=0.05))
            await page.fill("#text", "talk a lot")
            await page.press("#text", "Enter")
            await page.wait_for_selector(".msg.streaming")
            await page.click("#stop")
            await page.wait_for_selector("#send:visible")
            await asyncio.wait_for(llm.requests[-1].disconnected.wait(), 5)
            await page.screenshot(path=str(shots() / "webchat-1280.png"))

            await page.set_viewport_size({"width": 390, "height": 844})
            await page.reload()
            await page.wait_for_selector("#composer")
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390
            await page.screenshot(path=str(shots() / "webchat-390.png"))

            # a forged POST (another origin, or no token) is refused
            csrf = await page.evaluate("document.body.dataset.csrf")
            thread = await page.evaluate("document.body.dataset.thread")
            token = cookie["value"]
            async with httpx.AsyncClient() as http:
                forged = await http.post(f"{bot.web}/send/{thread}", json={"text": "forged"},
                                         headers={"Origin": "http://evil.example", "X-CSRF": csrf,
                                                  "Cookie": f"chatgate_web={token}"})
                assert forged.status_code == 403
                tokenless = await http.post(f"{bot.web}/send/{thread}", json={"text": "forged"},
                                            headers={"Origin": bot.web, "Cookie": f"chatgate_web={token}"})
                assert tokenless.status_code == 403
                page_headers = (await http.get(f"{bot.web}/")).headers
                assert "script-src 'self'" in page_headers["content-security-policy"]
            assert not any("forged" in str(r.body) for r in llm.requests)
        finally:
            await browser.close()
