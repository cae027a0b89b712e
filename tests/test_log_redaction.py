"""No secret in any log: the Redactor on every record of every handler (message, arguments,
exception text, stack), tokens inside URLs, masked URLs in ``chatgate check``, a 0600 log file."""

from __future__ import annotations

import logging
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from telegram import Bot
from telegram.error import NetworkError

from adapters.telegram.transport import AiohttpRequest
from bot.cli import _setup_logging
from bot.tracing import Redactor, format_traces, mask_url, strip_controls
from tests.test_cli import base_env, run_cli

TOKEN = "123456789:AAH" + "k3Y" * 11  # the shape of a Telegram bot token

pytestmark = pytest.mark.timeout(20)


@pytest.mark.parametrize(("secrets", "text", "expected"), [
    (("abc",), "key abc in xabcx", "key *** in x***x"),  # a configured secret of any length
    (("longer-secret", "long"), "long longer-secret", "*** ***"),  # longest first: no half left over
    ((), f"GET http://127.0.0.1:9/bot{TOKEN}/getMe", "GET http://127.0.0.1:9/bot***/getMe"),
    ((), f"https://api.telegram.org/file/bot{TOKEN}/photos/1.jpg", "https://api.telegram.org/file/bot***/photos/1.jpg"),
    ((), f"token {TOKEN} leaked", "token *** leaked"),
    ((), "sk-proj-" + "a" * 40, "***"),
    ((), "Authorization: Bearer abcdefghijklmnop0123", "Authorization: ***"),
    ((), "xoxb-1234567890-abcdefghij and xapp-1-A0B1C2D3E4F5", "*** and ***"),
    ((), "postgres://bot:hunter2@db:5432/x", "postgres://bot:***@db:5432/x"),
    ((), "a sentence with no secret: bot 12:30, sk-short", "a sentence with no secret: bot 12:30, sk-short"),
])
def test_redactor(secrets: tuple[str, ...], text: str, expected: str) -> None:
    assert Redactor(secrets)(text) == expected


@pytest.mark.parametrize(("url", "expected"), [
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("https://user:pass@llm.example.com/v1", "https://user:***@llm.example.com/v1"),
    (f"https://tg.example.com/bot{TOKEN}/", "https://tg.example.com/bot***/"),
    ("https://bot.example.com/telegram/9f8e7d6c5b4a39281706f5e4d3c2b1a0", "https://bot.example.com/telegram/***"),
    ("http://localhost:11434/v1?api_key=abc&x=1", "http://localhost:11434/v1?api_key=***&x=1"),
])
def test_mask_url(url: str, expected: str) -> None:
    assert mask_url(url) == expected


@pytest.fixture
def logged(tmp_path: Path) -> Iterator[tuple[Path, logging.Handler]]:
    """The CLI's own logging set-up (a log file, like `chatgate chat`), removed afterwards."""
    root = logging.getLogger()
    level = root.level
    handler = _setup_logging("DEBUG", tmp_path / "data" / "chatgate.log", secrets=("s3c", TOKEN))
    try:
        yield tmp_path / "data" / "chatgate.log", handler
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)


def test_every_part_of_a_record_is_scrubbed(logged: tuple[Path, logging.Handler]) -> None:
    path, handler = logged
    log = logging.getLogger("some.library")  # not ours: a child logger whose records propagate
    log.info("token %s and %r", TOKEN, {"key": "s3c"})
    try:
        raise RuntimeError(f"request to /bot{TOKEN}/getMe failed with s3c")
    except RuntimeError:
        log.exception("failed: %s", "s3c")
    log.warning("where", stack_info=True, extra={"note": "s3c"})
    log.info("%s %s", "only one argument")  # a broken format still reaches the log, scrubbed
    handler.flush()
    text = path.read_text()
    assert TOKEN not in text and "s3c" not in text
    assert "token *** and {'key': '***'}" in text and "RuntimeError: request to /bot***/getMe failed with ***" in text
    assert "Stack (most recent call last)" in text


async def test_a_transport_failure_with_the_token_in_the_url_leaves_no_token_in_the_log(
        logged: tuple[Path, logging.Handler]) -> None:
    """aiohttp's connect timeout names the whole URL, /bot<token>/ included; PTB and we log it."""
    path, handler = logged
    with socket.socket() as blackhole:  # listens, never accepts: once its backlog is full, connects hang
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(0)
        port = blackhole.getsockname()[1]
        fillers = []
        for _ in range(8):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        bot = Bot(TOKEN, base_url=f"http://127.0.0.1:{port}/bot",
                  request=AiohttpRequest(connect_timeout=0.3), get_updates_request=AiohttpRequest(connect_timeout=0.3))
        try:
            async with bot:
                pass
        except NetworkError as exc:
            error = exc
            logging.getLogger("adapters.telegram").exception("telegram: getMe failed")
        finally:
            for s in fillers:
                s.close()
    chain = f"{error} {error.__cause__}"
    assert f"/bot{TOKEN}/getMe" in chain  # the raw error really carries the token
    handler.flush()
    text = path.read_text()
    assert "/bot***/getMe" in text and TOKEN not in text and TOKEN.split(":")[1] not in text


def test_the_log_file_is_created_private(logged: tuple[Path, logging.Handler]) -> None:
    path, _ = logged
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_an_existing_log_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.log"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    handler = _setup_logging("INFO", path)
    logging.getLogger().removeHandler(handler)
    handler.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "old\n"


def test_check_masks_credentials_in_urls(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"""
providers: {{openai: {{base_url: "https://bot:hunter2@llm.example.com/v1"}}}}
channels: {{telegram: {{enabled: true, base_url: "https://tg.example.com/bot{TOKEN}", mode: webhook,
  webhook: {{url: "https://bot.example.com/hook/9f8e7d6c5b4a39281706f5e4d3c2b1a0", secret_token: abc}}}}}}
""")
    done = run_cli("check", "-c", str(config), cwd=tmp_path,
                   env=base_env(OPENAI_API_KEY="k", TELEGRAM_BOT_TOKEN=TOKEN))
    assert done.returncode == 0, done.stderr
    for secret in ("hunter2", TOKEN, "9f8e7d6c5b4a", "AAHk3Y"):
        assert secret not in done.stdout
    assert "https://bot:***@llm.example.com/v1" in done.stdout and "https://tg.example.com/bot***" in done.stdout


def test_a_cli_run_logs_no_secret_on_stderr(tmp_path: Path) -> None:
    """`chatgate run` whose Telegram transport fails: every stderr line is free of the token."""
    config = tmp_path / "config.yaml"
    config.write_text("channels: {telegram: {enabled: true, base_url: 'http://127.0.0.1:9'}}\n"
                      "logging: {level: DEBUG}\n")
    done = run_cli("run", "-c", str(config), cwd=tmp_path, env=base_env(OPENAI_API_KEY="sk-abc",
                                                                      TELEGRAM_BOT_TOKEN=TOKEN))
    assert done.returncode != 0 and "channels.telegram" in done.stderr
    assert TOKEN not in done.stderr and "sk-abc" not in done.stderr


def test_traces_print_no_control_characters() -> None:
    from bot.tracing import Span, SpanKind, TraceRecord

    trace = TraceRecord("run\x1b[2J1", "agent:main:telegram:dm:1\r", "main", 0.0, 1.0, "failed", "m\x07",
                        error="boom\x1b]0;pwned\x07", spans=(Span(SpanKind.TOOL, "exec\x00", 0.0, 1.0,
                                                                  preview="a\x1b[31mred\x9b"),))
    out = format_traces([trace])
    assert not any(ch in out for ch in "\x1b\x07\x00\r\x9b") and "boom" in out and "ared" in out
    assert strip_controls("tab\tand\nnewline stay") == "tab\tand\nnewline stay"


async def test_pairing_list_prints_no_control_characters(tmp_path: Path) -> None:
    import time

    from bot.store.sqlite import SQLiteStore

    config = tmp_path / "config.yaml"
    config.write_text(f"storage: {{path: '{tmp_path / 'db.sqlite'}'}}\n")
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        code = await store.pairing_request("telegram", "7", "Eve\x1b]0;owned\x07\x1b[2J\rAdmin", now=time.time())
        assert code is not None
        await store.pairing_request("telegram", "8", "Mallory\x1b[1A", now=time.time())
        await store.approve_pairing((await store.pending_pairings(time.time()))[-1].code, time.time())
    done = run_cli("pairing", "-c", str(config), "list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not any(ch in done.stdout for ch in "\x1b\x07\r") and "EveAdmin" in done.stdout
    assert "Mallory" in done.stdout
