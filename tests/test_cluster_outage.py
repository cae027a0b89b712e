"""The shared database goes away and comes back: two `chatgate run` instances on the local
PostgreSQL server, which this test stops and starts again (Debian's ``pg_ctlcluster``; the
test skips with one line when the server is not the local one it can restart). While it is
down an update is refused with a 500 (Telegram sends it again); once it is back, that update
and every later one are answered exactly once, and no instance died."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.cluster_bed import TOKEN, Instances, wait_until
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.pg import fresh_database, server_url

pytestmark = pytest.mark.timeout(120)


def local_cluster() -> tuple[str, str] | None:
    """(version, name) of the local Debian PostgreSQL cluster on the test server's port, when this
    process may stop and start it."""
    if shutil.which("pg_ctlcluster") is None or shutil.which("pg_lsclusters") is None or os.geteuid() != 0:
        return None
    url = urlsplit(server_url())
    if url.hostname not in ("127.0.0.1", "localhost", None):
        return None
    listed = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True, timeout=10).stdout
    for line in listed.splitlines():
        version, name, port, status, *_ = line.split()
        if int(port) == (url.port or 5432) and status == "online":
            return version, name
    return None


@contextmanager
def stopped(cluster: tuple[str, str]) -> Iterator[None]:
    subprocess.run(["pg_ctlcluster", *cluster, "stop", "-m", "fast"], check=True, timeout=60)
    try:
        yield
    finally:
        subprocess.run(["pg_ctlcluster", *cluster, "start"], check=True, timeout=60)


async def test_the_database_going_away_loses_nothing_and_doubles_nothing(tmp_path: Path) -> None:
    cluster = local_cluster()
    if cluster is None:
        pytest.skip("the PostgreSQL server is not a local cluster this test may restart (pg_ctlcluster, as root)")
    async with fresh_database() as url, FakeLLM() as llm, FakeTelegram(token=TOKEN) as tg, \
            Instances(tmp_path, url, llm, tg, count=2) as instances:
        await instances.start()
        assert await instances.post(tg.message(501, "before", user_id=501)) == 200
        await wait_until(lambda: len(tg.sent) == 1, 15, "the first answer", instances.tails)
        during = tg.message(502, "while the database is down", user_id=502)
        with stopped(cluster):
            assert await instances.post(during) == 500  # not stored: not confirmed, Telegram sends it again
        assert await instances.post(during) == 200
        after = [tg.message(510 + n, f"after {n}", user_id=510 + n) for n in range(6)]
        assert [await instances.post(u) for u in after] == [200] * 6
        await wait_until(lambda: len(tg.sent) == 8, 30, "every answer", instances.tails)
        await asyncio.sleep(1.5)
        assert sorted((s.chat_id, s.plain) for s in tg.sent) == [
            (501, "echo: before"), (502, "echo: while the database is down"),
            *((510 + n, f"echo: after {n}") for n in range(6))]
        assert len(llm.requests) == 8
        assert all(i.alive for i in instances.items)
