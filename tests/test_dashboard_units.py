"""The dashboard's pure parts, with tables of cases and no server: password hashes, the
config edit of ``passwd``, sessions and the login limiter on an injected clock, the origin and
host checks, escaping, charts, titles, and the live board on a fake registry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from bot.agent.events import EventBus, EventKind, Phase, RunEvent
from bot.config.binds import is_loopback, parse_bind
from bot.conversation import Conversation
from bot.dashboard.live import LiveBoard, session_label
from bot.dashboard.pages.conversations import title_of
from bot.dashboard.pages.layout import Viewer
from bot.dashboard.pages.operations import jobs_table
from bot.dashboard.passwd import set_user
from bot.dashboard.settings import Role
from bot.dashboard.sources import Bot
from bot.llm import ToolCall
from bot.runs import ActiveRun, Pending
from bot.schedules.jobs import Job, JobKind, JobState, RuleKind, When
from bot.schedules.operator import row
from bot.web import passwords
from bot.web.auth import (
    LoginLimiter,
    Sessions,
    client_key,
    csrf_ok,
    feed_allowed,
    host_allowed,
    hostname_of,
    own_origin,
    same_origin,
)
from bot.web.charts import bars, meter, span_bar
from bot.web.html import Html, escape, join, render, usd
from tests.fakes.channel import dm

FAST = passwords.MIN_N

# -- passwords -------------------------------------------------------------------------------


def test_a_hash_verifies_its_password_only() -> None:
    stored = passwords.hash_password("correct horse", n=FAST)
    assert stored.startswith(f"scrypt$n={FAST},r=8,p=1$") and "correct horse" not in stored
    assert passwords.verify("correct horse", stored)
    assert not passwords.verify("correct horse ", stored) and not passwords.verify("Correct horse", stored)
    assert passwords.hash_password("correct horse", n=FAST) != stored  # a new salt every time
    assert passwords.problem(stored) is None


@pytest.mark.parametrize("stored", [None, "", "hunter2", "scrypt$n=1024,r=8,p=1$c2FsdHNhbHQ=$a2V5a2V5a2V5a2V5a2V5",
                                    "scrypt$n=16385,r=8,p=1$c2FsdHNhbHQ=$a2V5a2V5a2V5a2V5a2V5",
                                    "scrypt$n=16384,r=8,p=1$!!$a2V5a2V5a2V5a2V5a2V5",
                                    "scrypt$n=2097152,r=8,p=1$c2FsdHNhbHQ=$a2V5a2V5a2V5a2V5a2V5"])
def test_anything_but_a_sound_hash_never_matches(stored: str | None) -> None:
    assert not passwords.verify("hunter2", stored)
    if stored:
        assert passwords.problem(stored) is not None


def test_an_empty_password_is_never_stored_nor_accepted() -> None:
    with pytest.raises(ValueError):
        passwords.hash_password("")
    assert not passwords.verify("", passwords.hash_password("x", n=FAST))


def test_tokens_are_long_and_random() -> None:
    tokens = {passwords.new_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) == 32 for t in tokens)


# -- passwd's config edit ----------------------------------------------------------------------

EDITS = [
    ("no section", "agent: {model: x}\n", "ann", "operator",
     'agent: {model: x}\n\ndashboard:\n  users:\n    ann:\n      role: operator\n      password_hash: "H"\n'),
    ("empty users", "dashboard:\n  enabled: true  # on\n  users: {}\nlogging: {level: INFO}\n", "ann", None,
     'dashboard:\n  enabled: true  # on\n  users:\n    ann:\n      role: viewer\n      password_hash: "H"\n'
     "logging: {level: INFO}\n"),
    ("no users key", "dashboard:\n    enabled: true\n", "ann", None,
     'dashboard:\n    users:\n      ann:\n        role: viewer\n        password_hash: "H"\n    enabled: true\n'),
    ("another user", 'dashboard:\n  users:\n    bob:\n      role: viewer\n      password_hash: "B"\n', "ann", None,
     'dashboard:\n  users:\n    bob:\n      role: viewer\n      password_hash: "B"\n    ann:\n      role: viewer\n'
     '      password_hash: "H"\n'),
    ("a new password, role kept", 'dashboard:\n  users:\n    bob:\n      role: operator\n'
     '      password_hash: "B"  # set 2024\n', "bob", None,
     'dashboard:\n  users:\n    bob:\n      role: operator\n      password_hash: "H"  # set 2024\n'),
    ("role changed, hash added", "dashboard:\n  users:\n    bob:\n      role: viewer\n", "bob", "operator",
     'dashboard:\n  users:\n    bob:\n      role: operator\n      password_hash: "H"\n'),
    ("a flow mapping", "dashboard: {users: {}}\n", "ann", None, None),
    ("a flow user", "dashboard:\n  users:\n    ann: {role: viewer}\n", "ann", None, None),
    ("tabs", "dashboard:\n\tusers: {}\n", "ann", None, None),
    ("a name that needs quoting", "dashboard:\n  users: {}\n", "a b", None, None),
]


@pytest.mark.parametrize(("text", "user", "role", "expected"), [e[1:] for e in EDITS], ids=[e[0] for e in EDITS])
def test_passwd_edits_the_config_as_text(text: str, user: str, role: str | None, expected: str | None) -> None:
    assert set_user(text, user, "H", role) == expected


# -- the bind ------------------------------------------------------------------------------


@pytest.mark.parametrize(("bind", "host", "port", "loopback"), [
    ("127.0.0.1:8787", "127.0.0.1", 8787, True), ("localhost:1", "localhost", 1, True),
    ("[::1]:8787", "::1", 8787, True), ("127.10.0.2:0", "127.10.0.2", 0, True),
    ("0.0.0.0:8787", "0.0.0.0", 8787, False), ("[::]:80", "::", 80, False),
    ("ops.example.com:443", "ops.example.com", 443, False), ("10.0.0.5:8787", "10.0.0.5", 8787, False),
])
def test_binds_are_parsed_and_only_loopback_counts_as_local(bind: str, host: str, port: int, loopback: bool) -> None:
    assert parse_bind(bind) == (host, port)
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("bind", ["8787", "127.0.0.1", "127.0.0.1:99999", "::1:8787", "host name:80", ""])
def test_binds_that_are_not_host_port(bind: str) -> None:
    with pytest.raises(ValueError):
        parse_bind(bind)


# -- sessions and the login limiter -----------------------------------------------------------


def test_a_session_lives_its_hours_and_ends_on_close() -> None:
    now = [1000.0]
    sessions = Sessions(3600, clock=lambda: now[0])
    token, login = sessions.open("olive", Role.OPERATOR)
    assert sessions.get(token) is login and login.role.may_act and len(token) >= 40
    assert sessions.get(token + "x") is None and sessions.get(None) is None and sessions.get("") is None
    assert csrf_ok(login, login.csrf) and not csrf_ok(login, "") and not csrf_ok(login, None)
    assert not csrf_ok(login, login.csrf[:-1])
    now[0] += 3599
    assert sessions.get(token) is login
    now[0] += 2
    assert sessions.get(token) is None and len(sessions) == 0
    other, _ = sessions.open("vera", Role.VIEWER)
    sessions.close(other)
    assert sessions.get(other) is None


def test_the_limiter_counts_failures_per_address_and_per_user_in_a_window() -> None:
    now = [0.0]
    limiter = LoginLimiter(clock=lambda: now[0])
    for _ in range(5):
        assert limiter.attempt("1.2.3.4", "olive") is None  # counted at once: five in flight are five
    assert limiter.attempt("1.2.3.4", "olive") == 900
    assert limiter.attempt("1.2.3.4", "someone") == 900  # the address is blocked, whoever it tries
    assert limiter.attempt("5.6.7.8", "olive") is None  # the user is not, from elsewhere
    limiter.succeeded("5.6.7.8", "olive")  # ... and a right password takes its try back
    for i in range(5):
        assert limiter.attempt(f"10.0.0.{i}", "OLIVE") is None  # a distributed guess, in any case
    assert limiter.attempt("10.0.0.0", "olive") == 900  # an address that failed waits while the name is attacked
    assert limiter.attempt("5.6.7.8", "olive") is None  # one that logged in as olive does not
    assert limiter.attempt("9.9.9.9", "olive") is None  # a new one gets one try a minute
    assert limiter.attempt("9.9.9.8", "olive") == 60
    now[0] = 60
    assert limiter.attempt("9.9.9.8", "olive") is None
    assert limiter.attempt("9.9.9.7", "vera") is None  # other names are not under attack
    now[0] = 901
    assert limiter.attempt("1.2.3.4", "olive") is None


@pytest.mark.parametrize(("address", "key"), [
    ("203.0.113.5", "203.0.113.5"),
    ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
    ("::ffff:203.0.113.5", "203.0.113.5"),
    ("not an address", "not an address"),
])
def test_the_limits_count_an_ipv6_client_by_its_64(address: str, key: str) -> None:
    assert client_key(address) == key


# -- where requests come from -------------------------------------------------------------------


@pytest.mark.parametrize(("host", "loopback_only", "allowed"), [
    ("127.0.0.1:8787", True, True), ("localhost:8787", True, True), ("[::1]:8787", True, True),
    ("localhost", True, True), ("app.localhost:9", True, True), ("127.0.0.1.nip.io:8787", True, False),
    ("evil.example", True, False), ("192.168.1.2:8787", True, False), ("", True, False), (None, True, False),
    ("ops.example.com", False, True),
])
def test_a_loopback_dashboard_answers_only_to_loopback_names(host: str | None, loopback_only: bool,
                                                             allowed: bool) -> None:
    assert host_allowed(host, loopback_only=loopback_only) is allowed


def test_hostnames_are_read_from_host_headers() -> None:
    assert [hostname_of(h) for h in ("LocalHost:80", "[::1]:8787", "::1", "a.b")] == ["localhost", "::1", "::1", "a.b"]


@pytest.mark.parametrize(("headers", "ok"), [
    ({"Origin": "http://127.0.0.1:8787"}, True), ({"Origin": "HTTP://127.0.0.1:8787"}, True),
    ({"Origin": "http://127.0.0.1:8788"}, False), ({"Origin": "https://127.0.0.1:8787"}, False),
    ({"Origin": "null"}, False), ({}, False), ({"Referer": "http://127.0.0.1:8787/live?x=1"}, True),
    ({"Referer": "http://evil.example/"}, False), ({"Referer": "not a url"}, False),
    ({"Origin": "http://evil.example", "Referer": "http://127.0.0.1:8787/"}, False),
])
def test_a_post_must_say_it_comes_from_the_page(headers: dict[str, str], ok: bool) -> None:
    assert same_origin(headers, "http://127.0.0.1:8787") is ok


@pytest.mark.parametrize(("headers", "ok"), [
    ({}, True), ({"Sec-Fetch-Site": "same-origin"}, True), ({"Sec-Fetch-Site": "none"}, True),
    ({"Sec-Fetch-Site": "cross-site"}, False), ({"Sec-Fetch-Site": "same-site"}, False),
    ({"Origin": "http://evil.example"}, False), ({"Origin": "http://127.0.0.1:8787"}, True),
])
def test_the_live_feed_is_refused_when_another_site_asks(headers: dict[str, str], ok: bool) -> None:
    assert feed_allowed(headers, "http://127.0.0.1:8787") is ok


def test_the_own_origin_behind_a_proxy_is_what_the_browser_sees() -> None:
    headers = {"Host": "127.0.0.1:8787", "X-Forwarded-Host": "ops.example.com", "X-Forwarded-Proto": "https"}
    assert own_origin(headers, tls=False, behind_proxy=True) == "https://ops.example.com"
    assert own_origin(headers, tls=False, behind_proxy=False) == "http://127.0.0.1:8787"  # not trusted without it
    assert own_origin({"Host": "LOCALHOST:1"}, tls=True, behind_proxy=False) == "https://localhost:1"


# -- escaping, charts and words ------------------------------------------------------------------


def test_everything_put_into_html_is_escaped_once() -> None:
    hostile = '<script>alert("x")</script>\' onmouseover=\'x'
    assert render('<a title="{}">{}</a>', hostile, hostile) == (
        '<a title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#x27; onmouseover=&#x27;x">'
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#x27; onmouseover=&#x27;x</a>")
    inner = render("<b>{}</b>", "a & b")
    assert render("<p>{}</p>", inner) == "<p><b>a &amp; b</b></p>"  # Html goes in as it is
    assert escape(inner) is inner and isinstance(join([inner, escape("<")], "<br>"), Html)
    assert join([Html("<i>"), Html("</i>")], "&") == "<i>&amp;</i>"


def test_charts_use_attributes_never_inline_style() -> None:
    drawn = meter(150, 100, 'over "100"') + bars([0, 5, 250.5], 100.0, "<label>") + span_bar(1, 2, 4, "llm", True)
    assert "style=" not in drawn and "<label>" not in drawn
    assert 'width="100.0"' in meter(500, 100, "x")  # clamped
    assert meter(5, None, "x") == ""


@pytest.mark.parametrize(("cost", "shown"), [(0, "$0"), (0.00001, "<$0.0001"), (0.0003, "$0.0003"),
                                             (0.012, "$0.012"), (0.5, "$0.50"), (12.345, "$12.35")])
def test_dollars(cost: float, shown: str) -> None:
    assert usd(cost) == shown


@pytest.mark.parametrize(("text", "title"), [
    ("plain question", "plain question"),
    ('Messages to you:\nfrom "Bob" (id telegram:43):\n> summarise\n> it', "summarise it"),
    ('Chat messages since your last reply (context only, not addressed to you):\nfrom "A" (id t:1):\n> hi\n\n'
     'Messages to you:\nfrom "B (id x)" (id t:2, owner):\n> go', "go"),
    ("a\n\nb   c", "a b c"), ("x" * 200, "x" * 119 + "…"),
])
def test_titles_are_what_was_asked(text: str, title: str) -> None:
    assert title_of(text) == title


@pytest.mark.parametrize(("key", "label"), [
    ("agent:main:telegram:dm:42", "telegram DM 42"),
    ("agent:main:slack:group:C1:thread:17.5", "slack group C1 thread 17.5"),
    ("agent:main:dm:ann", "linked DM ann"),
    ("agent:main:telegram:group:-100:user:7:sub:1", "telegram group -100 member 7 sub 1"),
    ("not a key", "not a key"),
])
def test_session_labels(key: str, label: str) -> None:
    assert session_label(key) == label


# -- the jobs on the Operations page ---------------------------------------------------------------

WINDOW_WARNING = "WhatsApp delivers it only within 24 hours of your last message <here>"


def _job(state: JobState) -> Job:
    return Job(7, JobKind.REMINDER, "renew the passport", When(RuleKind.AT, "UTC", 1_900_000_000),
               Conversation.of_key("agent:main:whatsapp:dm:491701234567"), "491701234567", "Ada",
               next_at=1_900_000_000, state=state)


async def _warn(job: Job) -> str:
    return WINDOW_WARNING


async def test_a_job_row_carries_why_its_messages_may_not_reach_the_person_while_it_is_active() -> None:
    asked: list[int] = []

    async def reach(job: Job) -> str:
        asked.append(job.id)
        return WINDOW_WARNING

    assert (await row(_job(JobState.ACTIVE), reach)).warning == WINDOW_WARNING
    assert (await row(_job(JobState.PAUSED), reach)).warning == ""  # as /tasks: a paused job is not due
    assert asked == [7]
    assert (await row(_job(JobState.ACTIVE))).warning == ""  # no channel that is Windowed: nothing to say


async def test_the_jobs_table_marks_a_job_that_may_not_reach_its_person() -> None:
    viewer = Viewer("olive", "operator", True, "csrf")
    warned, fine = await row(_job(JobState.ACTIVE), _warn), await row(_job(JobState.ACTIVE))
    html = str(jobs_table(viewer, [warned, fine], True, 1_800_000_000))
    assert html.count("⚠ ") == 1
    assert '<small class="warning" title="WhatsApp delivers it only within 24 hours of your last message ' \
           '&lt;here&gt;">⚠ WhatsApp delivers it only within 24 hours of your last message &lt;here&gt;</small>' in html
    assert "<here>" not in html


# -- the live board --------------------------------------------------------------------------


@dataclass
class FakeRegistry:
    active: list[ActiveRun] = field(default_factory=list)

    def runs(self) -> list[ActiveRun]:
        return list(self.active)


async def _stop(run_id: str) -> bool:
    return False


def _board(registry: FakeRegistry, now: list[float]) -> tuple[LiveBoard, EventBus]:
    bus = EventBus()
    bot = Bot(bus, registry, lambda key: 2 if key.endswith(":42") else 0, _stop, {}, "gpt-x")
    board = LiveBoard(bot, interval=0.05, clock=lambda: now[0])
    board.start()
    return board, bus


def _one_run(user: str) -> tuple[LiveBoard, EventBus, FakeRegistry, Conversation]:
    """A board (its clock at 1000) on a registry holding run ``r1``, of a DM from ``user``."""
    registry = FakeRegistry()
    board, bus = _board(registry, [1000.0])
    msg = dm("hello", user, platform="telegram")
    conversation = Conversation.of_key(f"agent:main:telegram:dm:{user}")
    registry.active.append(ActiveRun("r1", conversation.session_key, (Pending(msg, 1, conversation=conversation),)))
    return board, bus, registry, conversation


async def test_the_board_shows_each_run_and_what_it_does() -> None:
    board, bus, registry, conversation = _one_run("42")
    (row,) = board.snapshot()
    assert (row.state, row.tool, row.person, row.where, row.model, row.queued) == (
        "running", "", "User 42 (telegram:42)", "DM", "gpt-x", 2)  # seen before any event: running
    await bus.emit(RunEvent(EventKind.ACTIVITY, "r1", conversation, phase=Phase.QUEUED))
    assert board.snapshot()[0].state == "waiting"
    await bus.emit(RunEvent(EventKind.STARTED, "r1", conversation))
    assert (board.snapshot()[0].state, board.snapshot()[0].started_at) == ("running", 1000.0)
    await bus.emit(RunEvent(EventKind.TOOL_CALL, "r1", conversation, tool=ToolCall("c1", "read_file", "{}")))
    assert board.snapshot()[0].tool == "read_file"
    await bus.emit(RunEvent(EventKind.TOOL_RESULT, "r1", conversation, tool=ToolCall("c1", "read_file", "{}")))
    await bus.emit(RunEvent(EventKind.RETRYING, "r1", conversation))
    assert (board.snapshot()[0].tool, board.snapshot()[0].state) == ("", "retrying")
    await bus.emit(RunEvent(EventKind.ACTIVITY, "r1", conversation, phase=Phase.THINKING))
    assert board.snapshot()[0].state == "running"
    await bus.emit(RunEvent(EventKind.COMPLETED, "r1", conversation))
    registry.active.clear()
    assert board.snapshot() == []
    board.close()


async def test_the_board_wakes_its_watchers_once_per_interval_and_ignores_text() -> None:
    board, bus, _, conversation = _one_run("7")
    async with board.watching():
        waiter = asyncio.ensure_future(board.changed(5))
        await asyncio.sleep(0)
        for _ in range(200):
            await bus.emit(RunEvent(EventKind.DELTA, "r1", conversation, "tok "))
        assert not await board.changed(0.1)  # text alone changes nothing on the board
        await bus.emit(RunEvent(EventKind.STARTED, "r1", conversation))
        for i in range(50):
            await bus.emit(RunEvent(EventKind.TOOL_CALL, "r1", conversation, tool=ToolCall(f"c{i}", "x", "{}")))
        assert await asyncio.wait_for(waiter, 1)
        assert board.payload().startswith('{"now":1000.0,"runs":[{"run_id":"r1"')
    await bus.emit(RunEvent(EventKind.TOOL_RESULT, "r1", conversation))
    assert board._timer is None  # nobody watching: no timer is armed  # noqa: SLF001
    board.close()
    assert not await board.changed(1)  # closed: watchers are let go at once
