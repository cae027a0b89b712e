"""The web chat beside the API, in headless Chromium against ``chatgate run`` (the fake LLM, the
official ``openai`` SDK, the fake Telegram): an API run's approval pressed in the web chat (shown
to its person, not to someone else), and one answered by a typed ``/approve``; ``/help`` and
``/status`` typed there answered as commands; a person's thread closed to another; the
conversation list refreshed live (a new one, its title); the person's text exactly as typed after a reload; what was
said while the page's stream was down shown once it is back, once; sign-in by a code sent to the
person's Telegram (a wrong, a used and an expired code refused, codes not sent twice a minute)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FAKE_TITLE, Call, FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.test_webchat_browser import CHROMIUM, FLAGS, WebBot, shots

pytestmark = [pytest.mark.timeout(150),
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}")]


async def listening(port: int) -> None:
    while True:
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.05)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[WebBot, FakeLLM, FakeTelegram]]:
    async with FakeLLM() as llm, FakeTelegram() as tg:
        bot = WebBot(tmp_path, llm)
        bot.write(extra={
            "webchat": {"enabled": True, "bind": f"127.0.0.1:{bot.web_port}"},
            "tools": {"approval": {"write_file": "ask"}, "approval_timeout": 60},
            "channels": {"console": {"enabled": False},
                         "telegram": {"enabled": True, "token": tg.token, "base_url": tg.api_root,
                                      "dm_policy": "allowlist", "allow_from": [42, 43]}}})
        try:
            yield bot, llm, tg
        finally:
            await bot.close()


async def signed_in(browser: Any, bot: WebBot, person: str, **page: Any) -> Any:
    context = await browser.new_context(viewport={"width": 1280, "height": 800}, **page)
    tab = await context.new_page()
    await tab.goto(await bot.invite(person))
    await tab.click("text=Sign in")
    await tab.wait_for_selector("#composer")
    return tab


def approvals(bot: WebBot) -> list[tuple[str, str, str]]:
    with sqlite3.connect(f"file:{bot.tmp / 'chatgate.db'}?mode=ro", uri=True) as db:
        return list(db.execute("SELECT platform, outcome, decision FROM approvals ORDER BY asked_at"))


async def streamed(stream: Any, until: str) -> str:
    """The API stream's text up to ``until`` (the rest stays in ``stream``)."""
    content = ""
    while until not in content:
        chunk = await asyncio.wait_for(stream.__anext__(), 20)
        content += "".join(c.delta.content or "" for c in chunk.choices)
    return content


async def test_an_api_runs_approval_answered_in_the_web_chat(stack: tuple[WebBot, FakeLLM, FakeTelegram]) -> None:
    from playwright.async_api import async_playwright

    bot, llm, _ = stack
    key = await bot.key("alice")
    await bot.start()
    await listening(bot.web_port)
    client = bot.client(key)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = await signed_in(browser, bot, "alice")
            bob = await signed_in(browser, bot, "bob")  # neither the requester nor an owner
            llm.script(Reply.tool_calls([Call("write_file", {"path": "note.txt", "content": "hello"}, id="w1")]),
                       Reply.text("Saved it."))
            stream = (await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "save hello"}], stream=True)).__aiter__()
            assert "Answer in the web chat" in await streamed(stream, "/deny ")
            card = page.locator(".msg.ask", has_text="through the API")
            await card.locator("button", has_text="Allow once").wait_for()
            assert "write_file" in await card.inner_text()
            assert await bob.locator(".msg.ask").count() == 0  # not his to answer: not shown to him
            thread = await page.evaluate("document.body.dataset.thread")
            await page.fill("#text", "/help")  # the thread is alice's from now on
            await page.press("#text", "Enter")
            await page.locator(".msg.assistant", has_text="/status").wait_for()
            assert (await bob.goto(f"{bot.web}/c/{thread}")).status == 404  # and never bob's
            await page.screenshot(path=str(shots() / "webchat-1280-api-approval.png"))
            await page.set_viewport_size({"width": 390, "height": 844})
            assert await page.evaluate("document.documentElement.scrollWidth") <= 390
            await page.screenshot(path=str(shots() / "webchat-390-api-approval.png"))
            await page.set_viewport_size({"width": 1280, "height": 800})
            await card.locator("button", has_text="Allow once").click()
            rest = ""
            async for chunk in stream:
                rest += "".join(c.delta.content or "" for c in chunk.choices)
            assert rest.rstrip().endswith("Saved it.")
            assert (bot.tmp / "workspaces" / "alice" / "note.txt").read_text() == "hello"
            await page.locator(".msg.ask.closed", has_text="allowed once by alice").wait_for()

            # typed in the web chat: /approve of the API run's question, and /status, are commands
            llm.script(Reply.tool_calls([Call("write_file", {"path": "two.txt", "content": "2"}, id="w2")]),
                       Reply.text("Saved two."))
            stream = (await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "save two"}], stream=True)).__aiter__()
            approval_id = (await streamed(stream, "/deny ")).split("/deny ")[1].split(".")[0].strip()
            await page.fill("#text", f"/approve {approval_id}")
            await page.press("#text", "Enter")
            rest = ""
            async for chunk in stream:
                rest += "".join(c.delta.content or "" for c in chunk.choices)
            assert rest.rstrip().endswith("Saved two.")
            await page.fill("#text", "/status")
            await page.press("#text", "Enter")
            await page.locator(".msg.assistant", has_text="Context:").wait_for()
            assert approvals(bot) == [("api", "allowed", "o"), ("api", "allowed", "o")]
            assert not any("/status" in str(r.body) or "/approve" in str(r.body) for r in llm.requests)
        finally:
            await client.close()
            await browser.close()


async def test_the_page_stays_live(stack: tuple[WebBot, FakeLLM, FakeTelegram]) -> None:
    from playwright.async_api import async_playwright

    bot, llm, _ = stack
    await bot.start()
    await listening(bot.web_port)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            one = await signed_in(browser, bot, "alice")
            context = one.context
            two = await context.new_page()
            await two.goto(f"{bot.web}/")
            await two.wait_for_selector("#composer")
            # a new conversation in one tab is listed in the other at once; the text as typed after a reload
            typed = "[draft]\n\nkeep <b>this</b> *exactly*\n  as typed"
            llm.script(Reply.text("Kept."))
            await one.fill("#text", typed)
            await one.press("#text", "Enter")
            await two.locator("#threads a", has_text="[draft]").wait_for()
            await one.locator(".msg.assistant", has_text="Kept.").wait_for()
            await two.locator("#threads a", has_text=FAKE_TITLE).wait_for()  # the model's title, live
            assert await two.locator("#threads a").count() == 1
            await one.reload()
            await one.wait_for_selector("#composer")
            assert await one.locator(".msg.user").evaluate_all("ds => ds.map(d => d.textContent)") == [typed]

            # the stream down: what is said meanwhile (from another tab) is shown once it is back, once
            thread = await one.evaluate("document.body.dataset.thread")
            await two.goto(f"{bot.web}/c/{thread}")
            await two.wait_for_selector("#composer")
            await context.route("**/events/**", lambda route: route.abort())
            await one.evaluate("window.stop()")  # its event stream ends; reconnecting fails meanwhile
            llm.script(Reply.text("Answered while you were away.", chunk_size=3, delay=0.01))
            await two.fill("#text", "said elsewhere")
            await two.press("#text", "Enter")
            await two.locator(".msg.assistant", has_text="while you were away").wait_for()
            await asyncio.sleep(0.3)
            assert await one.locator(".msg", has_text="said elsewhere").count() == 0
            await context.unroute("**/events/**")
            await one.locator(".msg.assistant", has_text="while you were away").wait_for()
            await asyncio.sleep(1.5)  # nothing comes twice
            assert await one.locator(".msg.user", has_text="said elsewhere").count() == 1
            assert await one.locator(".msg.assistant", has_text="while you were away").count() == 1
            await one.screenshot(path=str(shots() / "webchat-1280-live.png"))
            await one.set_viewport_size({"width": 390, "height": 844})
            await one.screenshot(path=str(shots() / "webchat-390-live.png"))
        finally:
            await browser.close()


async def test_sign_in_by_a_code_sent_to_the_linked_chat(stack: tuple[WebBot, FakeLLM, FakeTelegram]) -> None:
    from playwright.async_api import async_playwright

    bot, _, tg = stack
    await bot.start()
    await listening(bot.web_port)

    async def code_for(tab: Any, person: str, chat: int, count: int) -> str:
        await tab.goto(f"{bot.web}/")
        await tab.fill("input[autocomplete=username]", person)
        await tab.click("text=Send me a code")
        await tab.wait_for_selector("text=a code was sent")
        await tg.wait_for(lambda: len([s for s in tg.sent if s.chat_id == chat]) >= count, timeout=10)
        return [s.plain or "" for s in tg.sent if s.chat_id == chat][-1].split("code is ")[1][:6]

    async def typed(tab: Any, person: str, code: str) -> str:
        await tab.goto(f"{bot.web}/")
        form = tab.locator("form[action='/code']")
        await form.locator("input[name=person]").fill(person)
        await form.locator("input[name=code]").fill(code)
        await form.locator("button").click()
        await tab.wait_for_load_state()
        return str(await tab.content())

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            tab = await browser.new_page()
            code = await code_for(tab, "alice", 42, 1)
            wrong = f"{(int(code) + 1) % 10**6:06d}"
            assert "not right" in await typed(tab, "alice", wrong)
            assert "id=\"composer\"" in await typed(tab, "alice", code)  # signed in
            other = await browser.new_page()  # a code works once
            assert "not right" in await typed(other, "alice", code)
            await code_for(other, "alice", 42, 1)  # asked again at once: no second code
            await asyncio.sleep(0.5)
            assert len([s for s in tg.sent if s.chat_id == 42]) == 1
            late = await code_for(other, "bob", 43, 1)
            with sqlite3.connect(bot.tmp / "chatgate.db") as db:
                db.execute("UPDATE webchat_invites SET expires_at = 0")
            assert "not right" in await typed(other, "bob", late)  # expired
            await other.goto(f"{bot.web}/")
            assert await other.locator("#composer").count() == 0
        finally:
            await browser.close()
