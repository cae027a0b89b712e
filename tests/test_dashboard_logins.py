"""The dashboard's login limits over real HTTP: tries sent at once are counted before the
password is checked, a stranger hammering a name cannot lock its owner out, and
``X-Forwarded-For`` counts only from a proxy the config trusts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.dashboard.reads import Reads
from tests.dashboard_bed import PASSWORDS, Bed, Client
from tests.fakes.llm_server import FakeLLM

WRONG, RIGHT = "not-her-password", PASSWORDS["olive"]


async def login_from(http: Client, address: str, password: str, user: str = "olive") -> int:
    """A login as if through the proxy, for a client at ``address``; its status."""
    response = await http.session.post(f"{http.url}/login", data={"user": user, "password": password},
                                       headers={"Origin": http.url, "X-Forwarded-For": address},
                                       allow_redirects=False)
    return response.status


async def outcomes(bed: Bed) -> list[tuple[str, str]]:
    assert bed.app is not None
    return [(a.address, a.outcome) for a in reversed(await Reads(bed.app.store).actions())]


async def test_forty_tries_sent_at_once_get_five_password_checks(tmp_path: Path, llm: FakeLLM) -> None:
    async with Bed(tmp_path, llm) as bed:
        http = await bed.client()
        tries = [http.login("olive", WRONG) for _ in range(39)] + [http.login("olive", RIGHT)]
        statuses = [r.status for r in await asyncio.gather(*tries)]
        assert set(statuses) <= {401, 303, 429}
        assert statuses.count(401) <= 5 and statuses.count(429) >= 34, statuses  # one refund at most: the right one
        checked = [o for _, o in await outcomes(bed) if o != "refused: too many failed logins"]
        assert len(checked) == statuses.count(401) + statuses.count(303) <= 6


async def test_a_stranger_hammering_a_name_does_not_lock_its_owner_out(tmp_path: Path, llm: FakeLLM) -> None:
    async with Bed(tmp_path, llm, dashboard="  behind_proxy: true") as bed:  # the test client is the proxy
        http = await bed.client()
        assert await login_from(http, "198.51.100.7", RIGHT) == 303  # olive, at home, yesterday
        for stranger in ("203.0.113.1", "203.0.113.2"):
            for _ in range(5):
                assert await login_from(http, stranger, WRONG) == 401
        assert await login_from(http, "203.0.113.1", RIGHT) == 429  # that address is done for 15 minutes
        assert await login_from(http, "198.51.100.7", RIGHT) == 303  # olive at home: known for her name
        assert await login_from(http, "198.51.100.99", RIGHT) == 303  # olive elsewhere: it has never failed
        assert await login_from(http, "203.0.113.50", WRONG) == 429  # one unknown address a minute, while attacked
        assert await login_from(http, "2001:db8:1:2::7", WRONG) == 429
        assert await login_from(http, "198.51.100.7", RIGHT) == 303
        assert await login_from(http, "203.0.113.60", "vera-viewer-pw", user="vera") == 303  # other names: untouched
        refused = [a for a, o in await outcomes(bed) if o == "refused: too many failed logins"]
        assert refused == ["203.0.113.1", "203.0.113.50", "2001:db8:1:2::7"]


async def test_one_ipv6_host_counts_as_one_address(tmp_path: Path, llm: FakeLLM) -> None:
    async with Bed(tmp_path, llm, dashboard="  behind_proxy: true") as bed:
        http = await bed.client()
        for i in range(1, 6):
            assert await login_from(http, f"2001:db8:1:2::{i}", WRONG) == 401
        assert await login_from(http, "2001:db8:1:2:ffff::1", RIGHT) == 429  # the same /64
        assert await login_from(http, "2001:db8:1:3::1", RIGHT) == 303


async def test_x_forwarded_for_counts_only_from_a_trusted_proxy(tmp_path: Path, llm: FakeLLM) -> None:
    # the proxy is elsewhere; a client reaching the port directly (here, from 127.0.0.1) is not it
    async with Bed(tmp_path, llm, dashboard="  behind_proxy: true\n  trusted_proxies: [192.0.2.1]") as bed:
        http = await bed.client()
        for i in range(5):
            assert await login_from(http, f"203.0.113.{i}", WRONG) == 401
        assert await login_from(http, "203.0.113.99", RIGHT) == 429  # a new forged address changes nothing
        assert {a for a, _ in await outcomes(bed)} == {"127.0.0.1"}


@pytest.mark.parametrize(("forwarded", "client"), [
    ("203.0.113.5", "203.0.113.5"),
    ("6.6.6.6, 203.0.113.5", "203.0.113.5"),  # what the client wrote itself is left of what the proxy saw
    ("203.0.113.5, 127.0.0.1", "203.0.113.5"),  # a second trusted proxy in the chain
])
async def test_behind_a_trusted_proxy_the_client_is_the_last_address_it_did_not_add(
        tmp_path: Path, llm: FakeLLM, forwarded: str, client: str) -> None:
    async with Bed(tmp_path, llm, dashboard="  behind_proxy: true") as bed:  # loopback: trusted by default
        http = await bed.client()
        assert await login_from(http, forwarded, WRONG) == 401
        assert await outcomes(bed) == [(client, "refused: wrong name or password")]
