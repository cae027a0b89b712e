"""The dashboard over HTTP: logins, the guard (session, CSRF, Origin, Host), roles, the live
feed, the audit trail, start-up refusals and the CLI. The browser tests
(``test_dashboard_browser.py``) drive the same server from Chromium."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from bot.cli import main
from bot.dashboard.reads import Reads
from bot.dashboard.server import CSP
from bot.errors import ConfigError
from tests.dashboard_bed import PASSWORDS, Bed, cheap_hash
from tests.fakes.channel import dm
from tests.fakes.llm_server import FakeLLM, Reply

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("/live", "/conversations", "/runs", "/people", "/operations")


@pytest.fixture
async def bed(tmp_path: Path, llm: FakeLLM) -> Bed:
    async with Bed(tmp_path, llm) as opened:
        yield opened  # type: ignore[misc]


async def test_a_login_gives_a_strict_cookie_and_every_page_its_headers(bed: Bed) -> None:
    http = await bed.client()
    response = await http.login("olive", PASSWORDS["olive"])
    assert response.status == 303 and response.headers["Location"] == "/live"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert PASSWORDS["olive"] not in cookie
    await http.refresh_csrf()
    for page in PAGES:
        answer = await http.get(page)
        assert answer.status == 200, page
        assert answer.headers["Content-Security-Policy"] == CSP
        assert answer.headers["X-Frame-Options"] == "DENY" and answer.headers["Cache-Control"] == "no-store"
        assert answer.headers["Server"] == "chatgate"
        text = await answer.text()
        assert "<script>" not in text and " style=" not in text and "onclick" not in text  # nothing inline
    css = await http.get("/static/app.css")
    assert css.status == 200 and css.content_type == "text/css" and "immutable" in css.headers["Cache-Control"]
    assert (await http.get("/static/../server.py")).status == 404


async def test_without_a_login_nothing_is_shown_or_done(bed: Bed) -> None:
    http = await bed.client()
    for page in PAGES:
        answer = await http.get(page)
        assert answer.status == 303 and answer.headers["Location"] == "/login"
    assert (await http.get("/live/events")).status == 401
    stranger = await bed.client("olive")  # a valid CSRF token, but no session of one's own
    http.csrf = stranger.csrf
    refused = await http.post("/live/stop", {"run": "x"})
    assert refused.status == 401


async def test_a_post_without_the_csrf_token_or_from_another_origin_is_refused(bed: Bed) -> None:
    assert bed.app is not None
    http = await bed.client("olive")
    await bed.discord.inject(dm("let me in", "77", platform="discord"))
    await bed.discord.wait_for_replies(1)
    (code,) = await bed.app.store.pending_pairings(time.time())
    for kw in ({"csrf": False}, {"origin": "http://evil.example"}, {"origin": None},
               {"origin": "null"}, {"headers": {"Origin": "http://127.0.0.1:1"}, "origin": None}):
        response = await http.post("/people/approve", {"code": code.code}, **kw)  # type: ignore[arg-type]
        assert response.status == 403, kw
        assert "Refused" in await response.text()
    wrong = dict(http.__dict__)
    http.csrf = "not-the-token"
    assert (await http.post("/people/approve", {"code": code.code})).status == 403
    http.csrf = wrong["csrf"]
    assert await bed.app.store.pending_pairings(time.time()) == [code]  # nothing happened
    outcomes = [a.outcome for a in await Reads(bed.app.store).actions()]
    assert outcomes.count("refused: another origin") == 4 and outcomes.count("refused: no valid CSRF token") == 2
    # the same request, done right, goes through
    done = await http.post("/people/approve", {"code": code.code})
    assert done.status == 303 and await bed.app.store.is_approved("discord", "77")


async def test_a_referer_from_the_page_stands_for_a_missing_origin(bed: Bed) -> None:
    http = await bed.client("olive")
    response = await http.post("/live/stop", {"run": "none"}, origin=None, headers={"Referer": f"{bed.url}/live"})
    assert response.status == 303  # accepted: the run is simply not there
    assert (await http.post("/live/stop", {"run": "none"}, origin=None,
                            headers={"Referer": "http://evil.example/live"})).status == 403


async def test_a_viewer_is_refused_every_action_and_it_is_recorded(bed: Bed, llm: FakeLLM) -> None:
    assert bed.app is not None
    run = await bed.hanging_run()
    vera = await bed.client("vera")
    page = await (await vera.get("/live")).text()
    assert "Stop" not in page.split('id="live-runs"')[1].split("</tbody>")[0]
    for path, data in (("/live/stop", {"run": run.run_id}), ("/people/approve", {"code": "ABCDEFGH"}),
                       ("/people/deny", {"code": "ABCDEFGH"}), ("/operations/pause", {"job": "j1"}),
                       ("/operations/cancel", {"job": "j1"})):
        response = await vera.post(path, data)
        assert response.status == 403 and "viewers cannot" in await response.text(), path
    assert list(bed.app.turns.dispatcher.registry.runs()) == [run]  # still running
    assert not llm.disconnects[0].is_set()
    refused = [(a.user, a.action, a.outcome) for a in await Reads(bed.app.store).actions() if a.outcome == "refused: viewer"]
    assert ("vera", "stop", "refused: viewer") in refused and len(refused) == 5


async def test_the_live_feed_refuses_other_sites_and_sends_runs_as_they_start(bed: Bed, llm: FakeLLM) -> None:
    http = await bed.client("olive")
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        assert (await http.get("/live/events", headers=headers)).status == 403
    llm.script(Reply.hang())
    feed = await http.session.get(f"{bed.url}/live/events", headers={"Sec-Fetch-Site": "same-origin"})
    assert feed.status == 200 and feed.content_type == "text/event-stream"
    first = await _next_event(feed, "runs")
    assert first["runs"] == []
    started = time.time()
    await bed.telegram.inject(dm("hello <b>there</b>", "5", platform="telegram"))
    while not (data := await _next_event(feed, "runs"))["runs"]:
        pass
    (row,) = data["runs"]
    assert time.time() - started < 2.0
    assert row["person"] == "User 5 (telegram:5)" and row["label"] == "telegram DM 5" and row["model"] == "fake-model"
    feed.close()


async def _next_event(feed: aiohttp.ClientResponse, name: str) -> dict[str, object]:
    event = ""
    while True:
        line = (await asyncio.wait_for(feed.content.readline(), 5)).decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == name:
            return dict(json.loads(line[6:]))


async def test_a_name_that_is_not_the_dashboards_gets_nothing(bed: Bed) -> None:
    http = await bed.client("olive")
    for host in ("evil.example", "evil.example:8787", "192.168.1.5"):
        assert (await http.get("/live", headers={"Host": host})).status == 421
    assert (await http.get("/live", headers={"Host": "localhost"})).status == 200


async def test_logins_are_rate_limited_per_address(bed: Bed) -> None:
    http = await bed.client()
    for _ in range(5):
        assert (await http.login("olive", "wrong")).status == 401
    refused = await http.login("olive", PASSWORDS["olive"])
    assert refused.status == 429 and int(refused.headers["Retry-After"]) > 60
    assert "Too many failed logins" in await refused.text()
    assert bed.app is not None
    outcomes = [a.outcome for a in await Reads(bed.app.store).actions()]
    assert outcomes.count("refused: wrong name or password") == 5 and outcomes[0] == "refused: too many failed logins"


async def test_a_failed_login_never_writes_down_a_name_that_is_nobodys(bed: Bed,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    http = await bed.client()
    caplog.set_level("INFO")
    assert (await http.login("Tr0ub4dor&3", "x")).status == 401  # a password typed in the name field
    assert (await http.login("olive", "not-her-password")).status == 401
    assert bed.app is not None
    users = [a.user for a in await Reads(bed.app.store).actions()]
    assert users == ["olive", "(not a user)"]
    assert "Tr0ub4dor" not in caplog.text and "not-her-password" not in caplog.text


async def test_an_empty_or_unknown_password_never_logs_in(tmp_path: Path, llm: FakeLLM) -> None:
    async with Bed(tmp_path, llm, users=f'    olive: {{role: operator, password_hash: "{cheap_hash("pw")}"}}\n'
                                        "    ghost: {role: operator, password_hash: ''}") as bed:
        http = await bed.client()
        for user, password in (("olive", ""), ("ghost", ""), ("nobody", "pw"), ("olive", " pw")):  # 4: under the limit
            assert (await http.login(user, password)).status == 401, (user, password)
        assert (await http.login("olive", "pw")).status == 303
    with pytest.raises(ConfigError, match="dashboard.users: no user has a password"):
        async with Bed(tmp_path, llm, users="    ghost: {role: operator}"):
            pass


async def test_a_logout_ends_the_session_and_its_feed(bed: Bed) -> None:
    http = await bed.client("olive")
    feed = await http.session.get(f"{bed.url}/live/events")
    await _next_event(feed, "runs")
    assert (await http.post("/logout", {})).status == 303
    assert (await http.get("/live")).status == 303
    await asyncio.wait_for(feed.content.read(), 5)  # the feed ends (within a second) with the login


async def test_shutdown_with_a_page_open_is_quick(tmp_path: Path, llm: FakeLLM) -> None:
    bed = Bed(tmp_path, llm)
    await bed.__aenter__()
    http = await bed.client("olive")
    feed = await http.session.get(f"{bed.url}/live/events")
    await _next_event(feed, "runs")
    started = time.monotonic()
    await bed.__aexit__(None, None, None)
    assert time.monotonic() - started < 3.0


# -- start-up refusals and the command line ----------------------------------------------


def _config(tmp_path: Path, dashboard: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
providers: {{openai: {{api_key: test-key, base_url: "http://127.0.0.1:9/v1"}}}}
storage: {{path: "{tmp_path / 'chatgate.db'}"}}
channels: {{console: {{enabled: false}}, telegram: {{enabled: true, token: "123:{'A' * 35}"}}}}
dashboard: {dashboard}
""")
    return path


@pytest.mark.parametrize(("dashboard", "expected"), [
    ('{enabled: true, bind: "0.0.0.0:8787"}',
     "chatgate: dashboard.bind: 0.0.0.0:8787 can be reached from other machines, and the dashboard binds to this "
     "machine only (use 127.0.0.1 with an SSH tunnel, or set dashboard.allow_remote: true with tls_cert and "
     "tls_key or behind_proxy)"),
    ('{enabled: true, bind: "192.168.1.10:8787", allow_remote: true}',
     "chatgate: dashboard.allow_remote: a remote dashboard needs TLS (set dashboard.tls_cert and tls_key, or "
     "behind_proxy: true behind a TLS proxy)"),
    ('{enabled: true, bind: "localhost"}', "chatgate: dashboard.bind: expected host:port such as 127.0.0.1:8787, "
                                           "got 'localhost'"),
])
@pytest.mark.parametrize("command", ["run", "dashboard"])
def test_an_unsafe_bind_refuses_to_start_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       dashboard: str, expected: str, command: str) -> None:
    assert main([command, "-c", str(_config(tmp_path, dashboard))]) == 2
    err = capsys.readouterr().err
    assert err == expected + "\n"


def test_a_remote_bind_with_a_proxy_or_tls_is_accepted(tmp_path: Path) -> None:
    from bot.settings import load_config

    for dashboard in ('{bind: "0.0.0.0:8787", allow_remote: true, behind_proxy: true}',
                      '{bind: "[::]:8787", allow_remote: true, tls_cert: c.pem, tls_key: k.pem}'):
        config = load_config(_config(tmp_path, dashboard), env={})
        assert config.dashboard.allow_remote


def test_passwd_writes_a_hash_the_config_accepts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, "\n  enabled: false   # not yet\n  users: {}")
    before = config.read_text()

    def passwd(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))  # not a terminal: one line is the password
        code = main(["dashboard", "passwd", "-c", str(config), *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    done = passwd("ann", "--role", "operator", stdin="correct horse\n")
    assert done.returncode == 0, done.stderr
    text = config.read_text()
    assert text.startswith(before.split("users:")[0]) and "# not yet" in text and "correct horse" not in text
    from bot.settings import load_config
    from bot.web.passwords import verify

    ann = load_config(config, env={}).dashboard.users["ann"]
    assert ann.role == "operator" and ann.password_hash is not None
    assert verify("correct horse", ann.password_hash.get_secret_value())
    token = passwd("bot-ops", "--generate")
    assert token.returncode == 0 and "token (shown once" in token.stdout
    shown = token.stdout.rsplit(": ", 1)[1].strip()
    ops = load_config(config, env={}).dashboard.users["bot-ops"]
    assert ops.role == "viewer" and ops.password_hash is not None
    assert verify(shown, ops.password_hash.get_secret_value())
    assert passwd("ann", stdin="\n").returncode == 1  # empty: refused, nothing changed
    config.write_text("dashboard: {users: {ann: {role: viewer}}}\n")
    flow = passwd("ann", stdin="pw\n")
    assert flow.returncode == 1 and 'password_hash: "scrypt$' in flow.stderr
    assert config.read_text() == "dashboard: {users: {ann: {role: viewer}}}\n"


def test_the_dashboard_off_loads_nothing_of_it(tmp_path: Path) -> None:
    code = f"""
import asyncio, sys
from bot.app import App
from bot.settings import load_config
from tests.fakes.channel import RecordingChannel
config = load_config({str(_config(tmp_path, "{enabled: false}"))!r}, env={{}})
async def main():
    app = App(config, {{"telegram": RecordingChannel("telegram")}})
    await app.__aenter__()
    await app.__aexit__(None, None, None)
asyncio.run(main())
print(sorted(m for m in sys.modules if m.startswith("bot.dashboard")))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # its spec, section (with the password check, stdlib only) and table, never its server or pages
    assert out.stdout.strip() == "['bot.dashboard', 'bot.dashboard.capability', 'bot.dashboard.config', " \
                                 "'bot.dashboard.tables']"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl to make a test certificate")
async def test_over_tls_the_cookie_is_secure_and_host_prefixed(tmp_path: Path, llm: FakeLLM) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True, timeout=60)
    async with Bed(tmp_path, llm, dashboard=f"  tls_cert: {cert}\n  tls_key: {key}") as bed:
        assert bed.url.startswith("https://127.0.0.1:")
        http = await bed.client()
        response = await http.session.post(f"{bed.url}/login", data={"user": "olive", "password": PASSWORDS["olive"]},
                                           headers={"Origin": bed.url}, allow_redirects=False, ssl=False)
        assert response.status == 303
        cookie = response.headers["Set-Cookie"]
        assert cookie.startswith("__Host-chatgate=") and "Secure" in cookie
        assert response.headers["Strict-Transport-Security"].startswith("max-age=")


def test_the_hashes_in_the_bed_are_real(tmp_path: Path) -> None:
    from bot.web.passwords import problem, verify

    assert problem(cheap_hash("x")) is None and verify("x", cheap_hash("x"))
