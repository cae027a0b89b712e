"""Test-wide guards: no test may reach past this machine's loopback."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator

import pytest

from tests.fakes.llm_server import FakeLLM

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: object) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded(real):
    def connect(self: socket.socket, address: object):  # type: ignore[no-untyped-def]
        if not _is_local(address):
            raise ConnectionRefusedError(f"tests may only connect to 127.0.0.1, not {address!r}")
        return real(self, address)

    return connect


socket.socket.connect = _guarded(_real_connect)  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded(_real_connect_ex)  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real keys in a developer's shell must never reach a test."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
                 "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    """A fake OpenAI + Anthropic server on 127.0.0.1 for one test."""
    async with FakeLLM() as server:
        yield server


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The PostgreSQL tests' template database goes with the test process."""
    from tests.pg import drop_templates

    drop_templates()
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where the dashboard's browser tests saved their screenshots (look at them)."""
    from tests.dashboard_bed import SCREENSHOTS, taken

    if taken:
        terminalreporter.write_line(f"dashboard screenshots ({len(taken)}): {SCREENSHOTS}")
