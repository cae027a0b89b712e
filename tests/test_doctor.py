"""``chatgate doctor`` (issue 34 item 5) as an operator runs it, against the fakes: the LLM key and
model through a real call, each platform's token live (Telegram getMe; Slack auth.test and the
app-level token; Discord /users/@me and the Message Content intent), the database, the
workspace root; a table with one line of advice each, exit 1 on any failure, no secret shown."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.channels import Check, Outcome
from bot.doctor.table import table
from bot.store.migrations import SCHEMA_VERSION
from tests.fakes.discord_server import MESSAGE_CONTENT, FakeDiscord
from tests.fakes.llm_server import FakeLLM
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.test_cli import ROOT, base_env
from tests.test_upgrades import old_database

KEY = "sk-good-key-4242"


@dataclass
class Fakes:
    llm: FakeLLM
    tg: FakeTelegram
    slack: FakeSlack
    dc: FakeDiscord


@pytest.fixture
async def fakes() -> AsyncIterator[Fakes]:
    async with FakeLLM(api_key=KEY) as llm, FakeTelegram() as tg, FakeSlack() as slack, FakeDiscord() as dc:
        yield Fakes(llm, tg, slack, dc)


def write_config(tmp_path: Path, f: Fakes, *, key: str = KEY, tg: str | None = None, bot: str | None = None,
                 app: str | None = None, dc: str | None = None, extra: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: "{key}", base_url: "{f.llm.openai_base_url}"}}}}
storage: {{path: "{tmp_path / 'data' / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
channels:
  telegram: {{enabled: true, token: "{tg or f.tg.token}", base_url: "{f.tg.api_root}"}}
  slack: {{enabled: true, bot_token: "{bot or f.slack.bot_token}", app_token: "{app or f.slack.app_token}",
           base_url: "{f.slack.base_url}"}}
  discord: {{enabled: true, owners: ["80351110224678912"], guilds: ["1"], token: "{dc or f.dc.token}",
             api_base: "{f.dc.api_base}", gateway_url: "{f.dc.gateway_url}"}}
{extra}
""")
    return path


async def doctor(config: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "doctor", "-c", str(config), cwd=ROOT, env=base_env(),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def rows(out: str) -> dict[str, list[str]]:
    """Check name -> its rows' result columns (a name may have several rows)."""
    found: dict[str, list[str]] = {}
    for line in out.splitlines()[1:]:
        if not line.strip():
            break
        parts = line.split()
        name = next(n for n in NAMES if line.startswith(n)) if any(line.startswith(n) for n in NAMES) else parts[0]
        found.setdefault(name, []).append(line[len(name):].split()[0])
    return found


NAMES = ("model fake-model", "telegram token", "slack bot token", "slack app token", "discord token",
         "discord content intent", "disk (workspaces)", "disk (database)")


async def test_everything_good_passes_and_says_so(tmp_path: Path, fakes: Fakes) -> None:
    code, out, err = await doctor(write_config(tmp_path, fakes))
    assert code == 0, out + err
    got = rows(out)
    for name in ("config", "model fake-model", "telegram token", "slack bot token", "slack app token",
                 "discord token", "discord content intent", "database", "workspaces", "versions"):
        assert set(got[name]) == {"ok"}, (name, out)
    assert got["sandbox"] == ["-"]  # exec is off
    assert "@" in out and fakes.tg.token not in out and KEY not in out
    assert len(fakes.llm.requests) == 1 and fakes.llm.requests[0].body["max_tokens"] <= 16  # one cheap call
    assert fakes.slack.called("apps.connections.open") and not (tmp_path / "data").exists()  # nothing made


async def test_bad_tokens_and_a_bad_key_fail_each_with_advice(tmp_path: Path, fakes: Fakes) -> None:
    config = write_config(tmp_path, fakes, key="sk-wrong-key-1111", tg="123456:WRONG", bot="xoxb-wrong",
                          app="xapp-wrong", dc="MTAw.wrong.token")
    code, out, err = await doctor(config)
    assert code == 1, out + err
    got = rows(out)
    for name in ("model fake-model", "telegram token", "slack bot token", "slack app token", "discord token"):
        assert got[name] == ["FAIL"], (name, out)
    lines = {line.split("  ")[0]: line for line in out.splitlines()}
    assert "refused the key" in lines["model fake-model"] and "providers.openai.api_key" in lines["model fake-model"]
    assert "@BotFather" in lines["telegram token"]
    assert "invalid_auth" in lines["slack bot token"] and "SLACK_BOT_TOKEN" in lines["slack bot token"]
    assert "connections:write" in lines["slack app token"]
    assert "DISCORD_BOT_TOKEN" in lines["discord token"]
    for secret in ("sk-wrong-key-1111", "123456:WRONG", "xoxb-wrong", "xapp-wrong", "MTAw.wrong.token"):
        assert secret not in out + err
    assert out.rstrip().splitlines()[-1].startswith("5 failed")


async def test_the_content_intent_fails_only_when_the_bot_needs_it(tmp_path: Path) -> None:
    async with FakeLLM(api_key=KEY) as llm, FakeTelegram() as tg, FakeSlack() as slack, \
            FakeDiscord(refuse_intents=MESSAGE_CONTENT) as dc:
        f = Fakes(llm, tg, slack, dc)
        code, out, _ = await doctor(write_config(tmp_path, f))
        assert code == 0 and "off (not needed" in out
        path = write_config(tmp_path, f)
        path.write_text(path.read_text().replace('gateway_url: "', 'require_mention: false, gateway_url: "'))
        code, out, _ = await doctor(path)
        assert code == 1 and rows(out)["discord content intent"] == ["FAIL"]
        assert "Privileged Gateway Intents > Message Content" in out


async def test_the_database_pending_migrations_warn_and_a_newer_one_fails(tmp_path: Path, fakes: Fakes) -> None:
    db = tmp_path / "data" / "chatgate.db"
    db.parent.mkdir()
    await old_database(db, 10)
    code, out, _ = await doctor(write_config(tmp_path, fakes))
    assert code == 0 and rows(out)["database"] == ["WARN"] and "migrations pending (0011_" in out
    assert "chatgate migrate" in out
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 3}")
    code, out, _ = await doctor(write_config(tmp_path, fakes))
    assert code == 1 and rows(out)["database"] == ["FAIL"] and "newer chatgate" in out


def test_the_table_has_one_line_each_and_sums_up() -> None:
    checks = [Check.ok("config", "x.yaml loads"), Check.fail("telegram token", "refused\x1b[2J", "copy it again"),
              Check.warn("database", "2 pending", "run chatgate migrate"), Check(
                  "sandbox", Outcome.SKIP, "off")]
    lines = table(checks).splitlines()
    assert lines[0].split() == ["CHECK", "RESULT", "FOUND", "ADVICE"]
    assert lines[2].split() == ["telegram", "token", "FAIL", "refused", "copy", "it", "again"]
    assert lines[-1] == "1 failed, 1 warning, 1 ok"
    assert table([Check.ok("a", "b")]).splitlines()[-1] == "all 1 checks passed"


async def test_a_platform_without_its_own_doctor_is_checked_by_its_setup_probe(tmp_path: Path) -> None:
    """WhatsApp has no doctor of its own: its ``chatgate init`` probe (the phone number id, with
    the token) is its row, good and refused."""
    from tests.fakes.whatsapp_server import FakeWhatsApp

    async with FakeLLM(api_key=KEY) as llm, FakeWhatsApp() as wa:
        def config(token: str) -> Path:
            path = tmp_path / "config.yaml"
            path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: "{KEY}", base_url: "{llm.openai_base_url}"}}}}
storage: {{path: "{tmp_path / 'data' / 'chatgate.db'}"}}
workspace: {{root: "{tmp_path / 'workspaces'}"}}
channels:
  whatsapp: {{enabled: true, phone_number_id: "{wa.phone_number_id}", access_token: "{token}",
              app_secret: "{wa.app_secret}", verify_token: "{wa.verify_token}", base_url: "{wa.base_url}",
              allow_from: ["15551234567"], webhook: {{bind: "127.0.0.1:0"}}}}
""")
            return path

        code, out, err = await doctor(config(wa.token))
        line = next(x for x in out.splitlines() if x.startswith("whatsapp token"))
        assert code == 0 and " ok " in f" {line} ", out + err
        code, out, err = await doctor(config("EAAG-wrong-token"))
        line = next(x for x in out.splitlines() if x.startswith("whatsapp token"))
        assert code == 1 and "FAIL" in line and "EAAG-wrong-token" not in out + err, out + err
