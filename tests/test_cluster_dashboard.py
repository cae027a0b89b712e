"""The whole cluster on one page: two real `chatgate run` processes on one PostgreSQL database
(tests/cluster_bed.py), the first serving the dashboard, the second without one. The page lists
the run going on in the second instance, and its Stop button stops it there: the chat is told
"Stopped." as by /stop."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.cluster_bed import TOKEN, Instance, Instances, free_port, wait_until
from tests.dashboard_bed import PASSWORDS, Client, cheap_hash
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.pg import fresh_database

pytestmark = pytest.mark.timeout(120)

PAGE_PORT = free_port()
CHAT = 501
KEY = f"agent:main:telegram:dm:{CHAT}"


def dashboard_of(instance: Instance) -> dict[str, Any]:
    if instance.name != "i1":
        return {}  # the second instance serves no page: its runs show on the first one's
    return {"dashboard": {"enabled": True, "bind": f"127.0.0.1:{PAGE_PORT}", "users": {
        "olive": {"role": "operator", "password_hash": cheap_hash(PASSWORDS["olive"])}}}}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Instances]:
    async with fresh_database() as url, FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
            Instances(tmp_path, url, llm, tg, count=2, extra=dashboard_of) as instances:
        await instances.start()
        yield instances


async def test_the_page_of_one_instance_lists_and_stops_a_run_of_another(cluster: Instances) -> None:
    tg, llm = cluster.tg, cluster.llm
    llm.script(Reply.hang())
    cluster.balancer.aim(1)  # the second instance receives it, and runs it
    assert await cluster.post(tg.message(CHAT, "a long job", user_id=CHAT)) == 200
    await llm.wait_for_requests(1, timeout=20)
    assert (await cluster.holder(f"session:{KEY}")).name == "i2"
    url = f"http://127.0.0.1:{PAGE_PORT}"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                     timeout=aiohttp.ClientTimeout(total=20)) as session:
        page = Client(session, url)
        assert (await page.login("olive", PASSWORDS["olive"])).status == 303
        await page.refresh_csrf()
        live = await (await page.get("/live")).text()
        assert "1 run in flight" in live, live
        assert "on i2" in live and f"telegram DM {CHAT}" in live
        run_id = re.findall(r'<tr data-run="([^"]+)"', live)
        assert len(run_id) == 1
        assert re.search(r'name="instance" value="i2"', live)
        stopped = await page.post("/live/stop", {"run": run_id[0], "instance": "i2"})
        assert stopped.status == 303
        await wait_until(lambda: any(s.chat_id == CHAT and s.plain == "Stopped." for s in tg.sent), 20,
                         "the chat told it was stopped", cluster.tails)
        after = await (await page.get("/live")).text()
        assert "Stopped the run" in after and "0 runs in flight" in after, after
    audit = await cluster.query("SELECT target, outcome FROM dashboard_actions WHERE action = 'stop'")
    assert [tuple(r) for r in audit] == [(f"{run_id[0]} on i2", "done")]
