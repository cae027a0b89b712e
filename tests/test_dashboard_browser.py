"""The dashboard in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright for Python, against the real App with recording channels and the fake LLM.

Each test launches its own browser and is bounded in time. Screenshots of every page, at
1280x800 and at a phone's 390 px, go to ``tests.dashboard_bed.SCREENSHOTS`` (printed at the
end of the run; ``CHATGATE_SCREENSHOTS=dir`` to choose it). ``.ci/run`` installs chromium and
Playwright, so there these tests always run; elsewhere they skip when chromium is missing.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from bot.dashboard.reads import Reads
from bot.dashboard.server import Dashboard
from bot.dashboard.settings import settings_of
from bot.dashboard.sources import Bot, Operations, PeoplePolicy
from bot.limits import LimitSettings
from bot.messages import Answer, ChatType, Chunk, InboundMessage, Sender, Target
from bot.store.base import Summary
from tests.dashboard_bed import CHROMIUM, PASSWORDS, SCREENSHOTS, Bed, taken
from tests.fakes.channel import dm
from tests.fakes.llm_server import Call, FakeLLM, Reply

REQUIRED = os.environ.get("CHATGATE_REQUIRE_BROWSER") == "1"  # .ci/run: these tests must run, never skip
pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not CHROMIUM.exists() and not REQUIRED,
                                 reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]
if REQUIRED:
    import playwright.async_api as playwright
else:
    playwright = pytest.importorskip("playwright.async_api", reason="Playwright is not installed: "
                                                                    "pip install -e '.[test]'")

WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with playwright.async_playwright() as p:
        launched = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def bed(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Bed]:
    async with Bed(tmp_path, llm) as opened:
        yield opened


class Watched:
    """A page with its console errors and CSP violations recorded (there must be none)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("console", lambda m: self.problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.problems.append(str(e)))


async def open_page(browser: Any, viewport: dict[str, int] = WIDE) -> Watched:
    context = await browser.new_context(viewport=viewport)
    context.set_default_timeout(5000)
    return Watched(await context.new_page())


async def log_in(w: Watched, url: str, user: str, password: str | None = None) -> None:
    await w.page.goto(f"{url}/live")
    assert w.page.url.endswith("/login")
    await w.page.fill("input[name=user]", user)
    await w.page.fill("input[name=password]", PASSWORDS[user] if password is None else password)
    await w.page.click("button[type=submit]")
    await w.page.wait_for_url("**/live")


async def shoot(w: Watched, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await w.page.screenshot(path=str(path), full_page=True)
    taken.append(path)
    return path


async def live_connected(w: Watched) -> None:
    await w.page.wait_for_selector("#live-status.on")


# -- the tests ---------------------------------------------------------------------


async def test_log_in_and_out(browser: Any, bed: Bed) -> None:
    w = await open_page(browser)
    await log_in(w, bed.url, "olive")
    assert await w.page.inner_text(".who .user") == "olive"
    assert await w.page.text_content(".who .role") == "operator"
    cookies = await w.page.context.cookies()
    (cookie,) = cookies
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert PASSWORDS["olive"] not in w.page.url
    await w.page.click("text=Log out")
    await w.page.wait_for_url("**/login")
    await w.page.goto(f"{bed.url}/people")
    assert w.page.url.endswith("/login")
    assert w.problems == []


async def test_a_live_run_appears_and_its_stop_button_stops_it(browser: Any, bed: Bed, llm: FakeLLM) -> None:
    assert bed.app is not None
    w = await open_page(browser)
    await log_in(w, bed.url, "olive")
    await live_connected(w)
    llm.script(Reply.text("a very long answer " * 50, delay=0.5))
    await bed.telegram.inject(dm("write me an essay", "42", platform="telegram"))
    row = w.page.locator("#live-runs tr")
    await row.wait_for()
    assert "telegram DM 42" in await row.inner_text()
    await llm.wait_for_requests(1)
    await row.locator("button", has_text="Stop").click()
    await w.page.wait_for_url("**/live")
    await asyncio.wait_for(llm.disconnects[0].wait(), 3)  # the model's stream was closed
    replies = await bed.telegram.wait_for_replies(1)
    assert replies[-1].text == "Stopped." and replies[-1].chat_id == "42"
    assert "Stopped the run" in await w.page.inner_text(".flash")
    await w.page.locator("#live-runs tr").wait_for(state="detached")
    assert list(bed.app.turns.dispatcher.registry.runs()) == []
    (entry, *_) = await Reads(bed.app.store).actions()
    assert (entry.user, entry.role, entry.action, entry.outcome) == ("olive", "operator", "stop", "done")
    await shoot(w, "live-stopped-1280")
    assert w.problems == []


async def test_a_pairing_request_approved_from_the_page_lets_the_person_in(browser: Any, bed: Bed,
                                                                          llm: FakeLLM) -> None:
    assert bed.app is not None
    stranger = "900000000000000001"
    await bed.discord.inject(dm("hi, may I?", stranger, platform="discord"))
    (code_reply,) = await bed.discord.wait_for_replies(1)
    assert llm.requests == []  # not let in yet
    w = await open_page(browser)
    await log_in(w, bed.url, "olive")
    await w.page.click("nav >> text=People")
    row = w.page.locator("#pairing tr", has_text=f"discord:{stranger}")
    code = (await row.locator("code").inner_text()).strip()
    assert code in code_reply.text
    await row.locator("button", has_text="Approve").click()
    await w.page.wait_for_url("**/people")
    assert "can talk to the bot now" in await w.page.inner_text(".flash")
    assert await bed.app.store.is_approved("discord", stranger)
    await bed.discord.inject(dm("thanks!", stranger, platform="discord"))
    replies = await bed.discord.wait_for_replies(2)
    assert replies[-1].text == "echo: thanks!"
    actions = [(a.user, a.action, a.target, a.outcome) for a in await Reads(bed.app.store).actions()]
    assert ("olive", "approve", f"discord:{stranger}", "done") in actions
    assert w.problems == []


async def test_a_viewer_has_no_stop_button_and_a_forged_post_is_refused(browser: Any, bed: Bed,
                                                                      llm: FakeLLM) -> None:
    assert bed.app is not None
    run = await bed.hanging_run()
    w = await open_page(browser)
    await log_in(w, bed.url, "vera")
    await live_connected(w)
    row = w.page.locator("#live-runs tr")
    await row.wait_for()
    assert await row.locator("button").count() == 0
    assert await w.page.locator("button", has_text="Stop").count() == 0
    status = await w.page.evaluate("""async (run) => {
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        const body = new URLSearchParams({csrf, run});
        return (await fetch('/live/stop', {method: 'POST', body})).status;
    }""", run.run_id)
    assert status == 403
    assert list(bed.app.turns.dispatcher.registry.runs()) == [run] and not llm.disconnects[0].is_set()
    await w.page.goto(f"{bed.url}/people")
    assert await w.page.locator("button", has_text="Approve").count() == 0
    (entry, *_) = await Reads(bed.app.store).actions()
    assert (entry.user, entry.action, entry.outcome) == ("vera", "stop", "refused: viewer")
    assert [p for p in w.problems if "status of 403" not in p] == []  # the forged POST's refusal, nothing else


async def test_without_csrf_token_from_another_site_or_without_a_session_the_dashboard_refuses(
        browser: Any, bed: Bed, llm: FakeLLM) -> None:
    assert bed.app is not None
    run = await bed.hanging_run()
    w = await open_page(browser)
    await log_in(w, bed.url, "olive")
    # no CSRF token, from the dashboard's own page and session
    no_token = await w.page.evaluate("""async (run) =>
        (await fetch('/live/stop', {method: 'POST', body: new URLSearchParams({run})})).status""", run.run_id)
    assert no_token == 403
    # another site (localhost is another site than 127.0.0.1), in the same browser, logged in
    from aiohttp import web

    from tests.fakes.serving import serve

    port = int(bed.url.rsplit(":", 1)[1])
    evil = web.Application()

    async def evil_page(request: web.Request) -> web.Response:
        return web.Response(content_type="text/html", text=f"""<!doctype html>
<form id=f method=post action="http://127.0.0.1:{port}/live/stop"><input name=run value="{run.run_id}">
<input name=csrf value=guess></form>
<script>
window.feed = "pending";
const es = new EventSource("http://127.0.0.1:{port}/live/events", {{withCredentials: true}});
es.onmessage = () => {{ window.feed = "read"; }};
es.onerror = () => {{ window.feed = "refused"; es.close(); }};
fetch("http://127.0.0.1:{port}/live", {{credentials: "include"}}).then(
  r => {{ window.page = "read"; }}, e => {{ window.page = "refused"; }});
</script>""")

    evil.router.add_get("/", evil_page)
    runner, evil_port = await serve(evil, "127.0.0.1", 0)
    try:
        attacker = await w.page.context.new_page()
        await attacker.goto(f"http://localhost:{evil_port}/")
        await attacker.wait_for_function("window.feed !== 'pending' && window.page !== undefined")
        assert await attacker.evaluate("window.feed") == "refused"
        assert await attacker.evaluate("window.page") == "refused"
        async with attacker.expect_navigation():
            await attacker.evaluate("document.getElementById('f').submit()")
        assert "Log in first" in await attacker.inner_text("body")  # SameSite=Strict: no session came along
    finally:
        await runner.cleanup()
    assert list(bed.app.turns.dispatcher.registry.runs()) == [run] and not llm.disconnects[0].is_set()
    # no session at all: the dashboard's own login page, nobody logged in
    fresh = await (await browser.new_context()).new_page()
    await fresh.goto(f"{bed.url}/login")
    status = await fresh.evaluate("""async (run) =>
        (await fetch('/live/stop', {method: 'POST', body: new URLSearchParams({run, csrf: 'x'})})).status""",
                                  run.run_id)
    assert status == 401
    assert list(bed.app.turns.dispatcher.registry.runs()) == [run]


async def test_a_message_containing_script_shows_as_text(browser: Any, bed: Bed, llm: FakeLLM) -> None:
    assert bed.app is not None
    hostile = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> & <b>bold</b>'
    name = '<img src=x onerror="window.pwned = 3">Mallory'
    msg = InboundMessage("telegram", "bot", "66", ChatType.DM, Sender("66", name), hostile, "hostile-1")
    await bed.telegram.inject(msg)
    await bed.telegram.wait_for_replies(1)
    llm.script(Reply.hang())
    await bed.telegram.inject(InboundMessage("telegram", "bot", "66", ChatType.DM, Sender("66", name), hostile,
                                             "hostile-2"))
    await llm.wait_for_requests(2)
    w = await open_page(browser)
    await log_in(w, bed.url, "olive")
    await live_connected(w)
    row = w.page.locator("#live-runs tr")
    await row.wait_for()
    assert name in await row.inner_text()  # the person's name, as text, from the live feed
    await w.page.click("nav >> text=Conversations")
    link = w.page.locator("table a", has_text="<script>window.pwned = 1</script>")
    await link.click()
    await w.page.wait_for_url("**/conversations/*")
    texts = await w.page.locator("pre.text").all_inner_texts()
    assert hostile in texts and f"echo: {hostile}" in texts
    assert await w.page.locator("main script, main img, main b").count() == 0
    assert await w.page.evaluate("window.pwned") is None
    await w.page.goto(f"{bed.url}/conversations?q=Mallory")
    assert await w.page.locator("table tbody tr").count() == 1
    assert await w.page.evaluate("window.pwned") is None
    assert w.problems == []


async def test_the_login_is_rate_limited(browser: Any, bed: Bed) -> None:
    w = await open_page(browser)
    for attempt in range(5):
        await w.page.goto(f"{bed.url}/login")
        await w.page.fill("input[name=user]", "olive")
        await w.page.fill("input[name=password]", f"guess {attempt}")
        await w.page.click("button[type=submit]")
        assert await w.page.inner_text(".error") == "Wrong name or password."
    await w.page.fill("input[name=password]", PASSWORDS["olive"])  # the right one, too late
    await w.page.click("button[type=submit]")
    assert (await w.page.inner_text(".error")).startswith("Too many failed logins. Try again in ")
    assert w.page.url.endswith("/login")


# -- every page, seeded, at two widths -----------------------------------------------------


@dataclass(frozen=True)
class Server:  # the MCP hub's ServerStatus has these fields (and more)
    name: str
    transport: str
    state: str
    tools: int
    last_error: str | None
    since: float


@dataclass(frozen=True)
class ScheduledJob:
    id: str
    kind: str
    rule: str
    session_key: str
    next_at: float | None
    paused: bool = False
    text: str = ""
    warning: str = ""


@dataclass(frozen=True)
class Waiting:  # the approvals' ApprovalRecord has these fields (and more)
    id: str
    tool: str
    requester: str
    session_key: str
    asked_at: float


class FakeOps:
    """What the MCP hub, the scheduler and the approvals would give (their own shapes differ:
    the App turns them into these rows)."""

    def __init__(self) -> None:
        self.paused: set[str] = set()
        self.cancelled: set[str] = set()

    def mcp_status(self) -> Sequence[Server]:
        now = time.time()
        return (Server("files", "stdio", "ready", 7, None, now - 3600),
                Server("tickets", "http", "down", 0, "connection refused (retry in 30 s)", now - 95),
                Server("search", "http", "degraded", 3, "slow answers", now - 600))

    async def jobs(self) -> Sequence[ScheduledJob]:
        now = time.time()
        jobs = [ScheduledJob("j1", "reminder", "every day at 09:00 Europe/Paris", "agent:main:telegram:dm:42",
                             now + 3600, text="Stand-up in 10 minutes"),
                ScheduledJob("j2", "task", "cron 0 18 * * 1-5 UTC", "agent:main:telegram:group:-1001", now + 7200,
                             text="Summarise the day's messages for the team"),
                ScheduledJob("j3", "reminder", "at 2026-12-01 09:00 (Europe/Berlin)",
                             "agent:main:whatsapp:dm:491701234567", now + 2 * 86400, text="Renew the passport",
                             warning="WhatsApp delivers it only within 24 hours of your last message here, and this "
                                     "bot has no approved template for a reminder: write to me shortly before it is "
                                     "due, or it cannot reach you.")]
        return [replace(j, paused=j.id in self.paused) for j in jobs if j.id not in self.cancelled]

    async def set_paused(self, job_id: str, paused: bool) -> bool:
        (self.paused.add if paused else self.paused.discard)(job_id)
        return True

    async def cancel_job(self, job_id: str) -> bool:
        self.cancelled.add(job_id)
        return True

    async def pending_approvals(self) -> Sequence[Waiting]:
        return (Waiting("a1", "exec", "telegram:43", "agent:main:telegram:group:-1001", time.time() - 40),)


async def seed(bed: Bed, llm: FakeLLM) -> None:
    """Conversations with tool calls, a group, a failed run, a compaction summary, 30 days of
    usage, a pairing request, an owed answer and two runs in flight."""
    assert bed.app is not None
    store = bed.app.store
    llm.script(Reply.tool_calls([Call("list_files", {"path": "."})]),
               Reply.text("You have **AGENTS.md**, `SOUL.md` and a `notes/` folder with three files."))
    await bed.telegram.inject(InboundMessage("telegram", "bot", "42", ChatType.DM, Sender("42", "Ann Lee"),
                                             "What is in my workspace?", "s1"))
    await bed.telegram.wait_for_replies(1)
    llm.script(Reply.text("Here is the summary of the thread: the release moves to Friday; Bob owns the notes."))
    await bed.telegram.inject(InboundMessage("telegram", "bot", "-1001", ChatType.GROUP, Sender("43", "Bob Stone"),
                                             "summarise the thread please", "s2"))
    await bed.telegram.wait_for_replies(2)
    llm.script(Reply.error(400, message="the request was malformed"))
    await bed.telegram.inject(InboundMessage("telegram", "bot", "44", ChatType.DM, Sender("44", "Cleo"),
                                             "draw me a cat", "s3"))
    await bed.telegram.wait_for_replies(3)
    session = await store.session("agent:main:telegram:dm:42")
    stored = await store.live_messages(session)
    await store.save_summary(session, Summary("Ann asked what her workspace holds; it has AGENTS.md, SOUL.md and "
                                              "notes/.", stored[1].id, 2, 1800, 240, "compact-1", time.time()))
    db = sqlite3.connect(store.where)
    now = time.time()
    rows = [(person, "seed", tokens * (1 + day % 4), cost * (1 + day % 3), now - day * 86400)
            for person, tokens, cost in (("telegram:42", 900, 0.012), ("telegram:43", 2300, 0.031),
                                         ("telegram:1", 6000, 0.08))
            for day in range(0, 30, 1 if person != "telegram:43" else 3)]
    db.executemany("INSERT INTO charges (person, run_id, tokens, cost, created_at) VALUES (?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()
    await bed.discord.inject(dm("hello, I'm Dana from the support team", "900000000000000001", platform="discord"))
    await bed.discord.wait_for_replies(1)
    await store.store_answer(Answer("owed-1", "slack", Target("C0123", ChatType.GROUP), (Chunk("one"), Chunk("two")),
                                    created_at=now - 240))
    llm.script(Reply.hang(), Reply.hang())
    asked = len(llm.requests)
    await bed.telegram.inject(InboundMessage("telegram", "bot", "45", ChatType.DM, Sender("45", "Eve Martin"),
                                             "plan my week", "s4"))
    await bed.telegram.inject(InboundMessage("telegram", "bot", "-1002", ChatType.GROUP, Sender("46", "Finn"),
                                             "translate the spec", "s5"))
    await llm.wait_for_requests(asked + 2)


async def test_every_page_at_two_widths(browser: Any, bed: Bed, llm: FakeLLM) -> None:
    assert bed.app is not None
    await seed(bed, llm)
    app = bed.app
    ops = FakeOps()
    bot = Bot(app.events, app.turns.dispatcher.registry, app.turns.dispatcher.queued, app.turns.stop_run,
              app.channels, app.config.agent.model)
    dashboard = Dashboard(settings_of(app.config), app.store, bot=bot,
                          operations=Operations(mcp=ops, jobs=ops, approvals=ops),
                          people=PeoplePolicy(LimitSettings(None, 5000, 0.5), ("telegram:1",)))
    async with dashboard:
        url = dashboard.url.rstrip("/")
        for label, viewport in (("1280", WIDE), ("390", PHONE)):
            w = await open_page(browser, viewport)
            await w.page.goto(f"{url}/login")
            await shoot(w, f"login-{label}")
            await log_in(w, url, "olive")
            await live_connected(w)
            await w.page.locator("#live-runs tr").nth(1).wait_for()
            pages = [("live", "/live"), ("conversations", "/conversations"), ("runs", "/runs"),
                     ("people", "/people"), ("operations", "/operations")]
            ann = (await Reads(app.store).sessions("Ann"))[0]
            traces = await app.store.traces("agent:main:telegram:dm:42", 5)
            pages += [("conversation", f"/conversations/{ann.id}"), ("run", f"/runs/{traces[-1].run_id}")]
            for name, path in pages:
                await w.page.goto(f"{url}{path}")
                if name == "live":
                    await live_connected(w)
                    await w.page.locator("#live-runs tr").nth(1).wait_for()
                if name == "conversation":
                    for summary in await w.page.locator("details").all():
                        await summary.locator("summary").click()
                width = await w.page.evaluate("document.documentElement.scrollWidth")
                assert width <= viewport["width"], f"{name} overflows at {label} px: {width}"
                await shoot(w, f"{name}-{label}")
            assert w.problems == [], w.problems
            await w.page.context.close()
        # the jobs' buttons act through the source
        w = await open_page(browser)
        await log_in(w, url, "olive")
        await w.page.goto(f"{url}/operations")
        await w.page.locator("#jobs tr", has_text="Stand-up").locator("button", has_text="Pause").click()
        assert "Paused job j1" in await w.page.inner_text(".flash")
        passport = w.page.locator("#jobs tr", has_text="Renew the passport")
        assert "⚠ WhatsApp delivers it only within 24 hours" in await passport.inner_text()
        assert ops.paused == {"j1"}
        await w.page.locator("#jobs tr", has_text="Summarise").locator("button", has_text="Cancel").click()
        assert ops.cancelled == {"j2"} and "Cancelled job j2" in await w.page.inner_text(".flash")
