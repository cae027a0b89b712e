"""`chatgate init` driven as a person would, through a pseudo-terminal (pexpect), against the fake
LLM and the fake Telegram, Slack and Discord servers in this test process: good answers write a
config that `chatgate check` accepts and `chatgate run` starts with (and answers the owner paired
by a code on Telegram); a refused key or token is caught at its question and asked again; Ctrl-C
part way writes nothing; an existing config is kept unless the person says otherwise; and the
`--non-interactive` form from flags and the environment."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest
import yaml

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram

pytestmark = pytest.mark.timeout(90)
ROOT = Path(__file__).resolve().parent.parent
WAIT = 20  # seconds for one expected line


@dataclass
class Fakes:
    llm: FakeLLM
    tg: FakeTelegram
    slack: FakeSlack
    discord: FakeDiscord
    tmp: Path

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a new user with the fakes' addresses, and no keys of the host."""
        env = {k: v for k, v in os.environ.items()
               if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN", "_SECRET", "_API_BASE", "_GATEWAY_URL"))
               and not k.startswith(("CHATGATE_", "PYTEST"))}
        env.update(PYTHONPATH=str(ROOT), OPENAI_BASE_URL=self.llm.openai_base_url, TELEGRAM_BASE_URL=self.tg.api_root,
                   SLACK_BASE_URL=self.slack.base_url, DISCORD_API_BASE=self.discord.api_base,
                   DISCORD_GATEWAY_URL=self.discord.gateway_url, TERM="dumb", COLUMNS="200")
        env.update(extra)
        return env

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> pexpect.spawn:
        return pexpect.spawn(sys.executable, ["-m", "bot", *args], cwd=str(self.tmp), env=env or self.env(),
                             encoding="utf-8", timeout=WAIT, dimensions=(50, 200))

    async def chatgate(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", *args, cwd=self.tmp,
                                                    env=env or self.env(), stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None
        return proc.returncode, out.decode()


@pytest.fixture
async def fakes(tmp_path: Path) -> AsyncIterator[Fakes]:
    async with FakeLLM() as llm, FakeTelegram() as tg, FakeSlack() as slack, FakeDiscord() as discord:
        yield Fakes(llm, tg, slack, discord, tmp_path)


async def expect(child: pexpect.spawn, pattern: str | list[str]) -> int:
    try:
        return int(await child.expect(pattern, async_=True))
    except (pexpect.TIMEOUT, pexpect.EOF):
        raise AssertionError(f"expected {pattern!r}; the terminal showed:\n{child.before}") from None


async def answer(child: pexpect.spawn, prompt: str, text: str) -> None:
    await expect(child, prompt)
    child.sendline(text)


async def provider(child: pexpect.spawn) -> None:
    await answer(child, r"Which provider\? \[1\]: ", "")
    await expect(child, "using OPENAI_BASE_URL=")
    await answer(child, r"Model \[gpt-4o-mini\]: ", "fake-model")
    await answer(child, r"API key \(hidden as you type\): ", "sk-fake")
    await expect(child, "✓ fake-model answered")


async def no_exec(child: pexpect.spawn) -> None:
    """The sandbox question, when this machine's bubblewrap works (else it is only told)."""
    if await expect(child, [r"\(the exec tool\)\? \[y/N\]: ", "stays off"]) == 0:
        child.sendline("n")


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in ("data", "workspaces"))


async def test_answers_write_a_config_that_check_accepts_and_run_starts_with(fakes: Fakes) -> None:
    fakes.llm.script(Reply.error(401))  # the first key typed is refused: asked again
    fakes.discord.app_flags = 1 << 18
    child = fakes.spawn("init")
    await answer(child, r"Which provider\? \[1\]: ", "")
    await answer(child, r"Model \[gpt-4o-mini\]: ", "fake-model")
    await answer(child, r"API key \(hidden as you type\): ", "sk-wrong")
    await expect(child, "refused the key")
    await answer(child, r"The API key \(hidden as you type\): ", "sk-fake")
    await expect(child, "✓ fake-model answered")

    await answer(child, r"Which platforms\?.*: ", "1, 2,3")
    await expect(child, f"using TELEGRAM_BASE_URL={fakes.tg.api_root}")
    await answer(child, r"Telegram token \(hidden as you type\): ", "999:WRONG-TOKEN")
    await expect(child, "Telegram refused the token")
    await answer(child, r"Telegram token \(hidden as you type\): ", fakes.tg.token)
    await expect(child, "✓ @chatgate_bot")
    await answer(child, r"Your Telegram user id, or Enter to pair with a code you send the bot: ", "")
    await expect(child, r"in a private chat: ([A-Z2-9]{8})")
    code = child.match.group(1)
    fakes.tg.push(fakes.tg.message(31, "hello?"))  # someone else first: not the code
    fakes.tg.push(fakes.tg.message(555, f"{code[:4]}-{code[4:].lower()}"))  # the owner, as typed on a phone
    await expect(child, "the code came from Telegram user 555")
    assert any(s.chat_id == 555 and "owner" in s.text for s in fakes.tg.sent)

    await answer(child, r"Discord token \(hidden as you type\): ", fakes.discord.token)
    await expect(child, r"Message Content intent on")
    await answer(child, r"Your Discord user id, or Enter for none yet: ", "alice")
    await expect(child, "can never match")
    await answer(child, r"Your Discord user id, or Enter for none yet: ", "80351110224678912")

    await answer(child, r"Slack bot token \(hidden as you type\): ", fakes.slack.bot_token)
    await answer(child, r"Slack app token \(hidden as you type\): ", "xapp-wrong")
    await expect(child, r"channels.slack.app_token: Slack refused the token \(invalid_auth\)")
    await answer(child, r"Slack app token \(hidden as you type\): ", fakes.slack.app_token)
    await expect(child, r"✓ chatgate in Fake")
    await answer(child, r"Your Slack user id, or Enter for none yet: ", "")
    await no_exec(child)
    await expect(child, r"Next: chatgate run -c config.yaml")
    await expect(child, pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before

    config, env = fakes.tmp / "config.yaml", fakes.tmp / ".env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    text = config.read_text()
    for secret in ("sk-fake", fakes.tg.token, fakes.slack.bot_token, fakes.slack.app_token, fakes.discord.token):
        assert secret not in text and secret in env.read_text()
    written = yaml.safe_load(text)
    assert written["providers"]["openai"]["api_key"] == "${OPENAI_API_KEY}"
    assert written["channels"]["telegram"]["token"] == "${TELEGRAM_BOT_TOKEN}"
    assert written["channels"]["telegram"]["owners"] == ["555"]
    assert written["channels"]["slack"]["dm_policy"] == "pairing"
    assert files(fakes.tmp) == [".env", "config.yaml"]  # no temporary file left

    code, out = await fakes.chatgate("check", "-c", "config.yaml")  # the keys come from .env alone
    assert code == 0, out
    assert "from OPENAI_API_KEY" in out and "telegram" in out

    run = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", "run", "-c", "config.yaml",
                                               cwd=fakes.tmp, env=fakes.env(), stdin=asyncio.subprocess.DEVNULL,
                                               stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        sent = len(fakes.tg.sent)
        fakes.tg.push(fakes.tg.message(555, "hi there"))
        deadline = time.monotonic() + 30
        while not any(s.text == "echo: hi there" for s in fakes.tg.sent[sent:]):
            assert run.returncode is None, (await run.stderr.read()).decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the owner got no answer"
            await asyncio.sleep(0.1)
        assert fakes.tg.sent[sent:][-1].chat_id == 555
    finally:
        run.terminate()
        await asyncio.wait_for(run.wait(), 15)
    assert run.returncode == 0


async def test_ctrl_c_part_way_writes_nothing(fakes: Fakes) -> None:
    child = fakes.spawn("init", "-c", "bot/config.yaml")
    await provider(child)
    await answer(child, r"Which platforms\?.*: ", "1")
    await expect(child, r"Telegram token \(hidden as you type\): ")
    child.sendintr()
    await expect(child, "Stopped: nothing was written.")
    await expect(child, pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert not (fakes.tmp / "bot").exists() or files(fakes.tmp / "bot") == []


async def test_a_compatible_servers_url_without_v1_is_asked_again(fakes: Fakes) -> None:
    env = fakes.env()
    del env["OPENAI_BASE_URL"]
    child = fakes.spawn("init", env=env)
    await answer(child, r"Which provider\? \[1\]: ", "3")
    await answer(child, r"Its base URL, with /v1 \[.*\]: ", fakes.llm.base_url)  # the server's root: a 404
    await answer(child, r"Model: ", "fake-model")
    await answer(child, r"any text if it needs none \(hidden as you type\): ", "local")
    await expect(child, r"not found \(404\) at .*: the base URL ends in /v1")
    await answer(child, r"Base URL \(OpenAI's ends in /v1\) \[.*\]: ", fakes.llm.openai_base_url)
    await answer(child, r"Model \[fake-model\]: ", "")
    await expect(child, "✓ fake-model answered")
    child.sendintr()
    await expect(child, pexpect.EOF)
    child.close()


async def test_an_existing_config_is_kept_unless_replacing_it_is_confirmed(fakes: Fakes) -> None:
    (fakes.tmp / "config.yaml").write_text("agent: {model: mine}\n")
    (fakes.tmp / ".env").write_text("OTHER_SECRET=kept\n")
    child = fakes.spawn("init")
    await answer(child, r"config.yaml and .env exist already. Replace them\? .* \[y/N\]: ", "")
    await expect(child, "Nothing written.")
    await expect(child, pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert (fakes.tmp / "config.yaml").read_text() == "agent: {model: mine}\n"

    child = fakes.spawn("init")
    await answer(child, r"Replace them\? .* \[y/N\]: ", "y")
    await provider(child)
    await answer(child, r"Which platforms\?.*: ", "")
    await no_exec(child)
    await expect(child, r"Next: chatgate chat -c config.yaml")
    await expect(child, pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (fakes.tmp / ".env").read_text().splitlines()[1:] == ['OTHER_SECRET="kept"', 'OPENAI_API_KEY="sk-fake"']
    assert yaml.safe_load((fakes.tmp / "config.yaml").read_text())["agent"]["model"] == "fake-model"


async def test_non_interactive_from_flags_and_the_environment(fakes: Fakes) -> None:
    env = fakes.env(OPENAI_API_KEY="sk-fake", TELEGRAM_BOT_TOKEN="999:WRONG-TOKEN")
    args = ("init", "--non-interactive", "--model", "fake-model", "--channel", "telegram", "--owner", "telegram:555")
    code, out = await fakes.chatgate(*args, env=env)
    assert code == 2
    assert out.strip() == ("chatgate: channels.telegram.token: Telegram refused the token "
                           "(copy it again from @BotFather: /mybots > your bot > API Token)")
    assert files(fakes.tmp) == []

    env["TELEGRAM_BOT_TOKEN"] = fakes.tg.token
    code, out = await fakes.chatgate(*args, env=env)
    assert code == 0, out
    assert "Next: chatgate run -c config.yaml" in out
    code, out = await fakes.chatgate(*args, env=env)
    assert code == 2 and "config.yaml: exists already (--force replaces it" in out

    bare = fakes.env()  # no keys in the environment: .env gives them
    code, out = await fakes.chatgate("check", "-c", "config.yaml", env=bare)
    assert code == 0, out
    written = yaml.safe_load((fakes.tmp / "config.yaml").read_text())
    assert written["channels"]["telegram"] == {"enabled": True, "base_url": fakes.tg.api_root,
                                               "token": "${TELEGRAM_BOT_TOKEN}", "dm_policy": "allowlist",
                                               "allow_from": ["555"], "owners": ["555"]}

    code, out = await fakes.chatgate("init", "--non-interactive", "--channel", "whatsapp", "--force",
                                     env=fakes.env(OPENAI_API_KEY="sk-fake"))
    assert code == 2 and out.startswith("chatgate: channels.whatsapp.phone_number_id: missing (set "
                                        "WHATSAPP_PHONE_NUMBER_ID")


@pytest.mark.parametrize("value", ["plain", "with space", 'qu"ote', "back\\slash", "#hash", "'single'", "", "a=b"])
def test_a_dotenv_line_reads_back_as_written(value: str) -> None:
    from bot.config import dotenv

    assert dotenv.parse(dotenv.line("NAME", value)) == {"NAME": value}


def test_dotenv_forms_and_a_bad_line_named_without_its_value() -> None:
    from bot.config import dotenv
    from bot.errors import ConfigError

    text = "# a comment\n\nexport A=1\nB = two  # note\nC='x # y'\n"
    assert dotenv.parse(text) == {"A": "1", "B": "two", "C": "x # y"}
    with pytest.raises(ConfigError) as caught:
        dotenv.parse("A=1\nsk-secret-value\n", "/srv/.env")
    assert str(caught.value) == "/srv/.env line 2: not a KEY=value line (write NAME=value, one a line)"


def test_the_config_reads_dotenv_beside_it_and_the_environment_wins(tmp_path: Path) -> None:
    from bot.settings import load_config

    (tmp_path / "config.yaml").write_text("providers: {openai: {api_key: '${KEY}'}}\nagent: {model: '${MODEL}'}\n")
    (tmp_path / ".env").write_text('KEY="from-dotenv"\nMODEL=dotenv-model\n')
    config = load_config(tmp_path / "config.yaml", {"MODEL": "env-model"})
    assert config.providers.openai.api_key is not None
    assert config.providers.openai.api_key.get_secret_value() == "from-dotenv"
    assert config.agent.model == "env-model"
