"""Recall end to end (issue 37): the whole App, the real Telegram SDK against the fake Telegram,
a recording channel as Discord, the fake LLM and the fake embeddings endpoint; on SQLite, and
the same on PostgreSQL.

A fact said before /new is found by history_search after it; a fact compacted away is found; a
linked person finds on Discord what they said on Telegram; another person and a group never
find it; memory found by a paraphrase; unchanged files are not embedded again; auto_recall puts
the passage into the request, marked; forget removes everything."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.recall.forget import forget_person
from bot.settings import load_config
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.embeddings_server import FakeEmbeddings
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.pg import fresh_database

pytestmark = pytest.mark.timeout(90)

ALICE, BOB, GROUP = 42, 43, -1001234567890
ALICE_DISCORD = "7"
FACT = "My favourite book is Dune by Frank Herbert"


class Bed:
    def __init__(self, tmp: Path, llm: FakeLLM, tg: FakeTelegram, emb: FakeEmbeddings, database: str | None) -> None:
        self.tmp, self.llm, self.tg, self.emb, self.database = tmp, llm, tg, emb, database
        self.app: App | None = None
        self.discord = RecordingChannel("discord")

    async def start(self, memory: str = "{}") -> App:
        from adapters.telegram.channel import TelegramChannel

        storage = f'{{url: "{self.database}"}}' if self.database else f'{{path: "{self.tmp / "chatgate.db"}"}}'
        path = self.tmp / "config.yaml"
        path.write_text(f"""
agent:
  model: fake-model
  compaction: {{keep_last: 1}}
  identity_links: {{alice: ["telegram:{ALICE}", "discord:{ALICE_DISCORD}"]}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}", max_retries: 0}}}}
storage: {storage}
workspace: {{root: "{self.tmp / 'workspaces'}"}}
runs: {{debounce_ms: 0}}
memory: {memory}
channels:
  telegram: {{enabled: true, token: "{self.tg.token}", base_url: "{self.tg.api_root}", dm_policy: open,
             group_policy: open, require_mention: false}}
  discord: {{dm_policy: open}}
""")
        config = load_config(path, env={})
        self.app = App(config, {"telegram": TelegramChannel(config.channels.telegram, poll_timeout=1),
                                "discord": self.discord})
        await self.app.__aenter__()
        return self.app

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.__aexit__(None, None, None)
            self.app = None

    async def say(self, text: str, user: int = ALICE, chat: int | None = None) -> str:
        """Send on Telegram; the bot's next message to that chat."""
        chat = user if chat is None else chat
        before = len(self.sent(chat))
        extra = {"chat_type": "supergroup"} if chat < 0 else {}
        self.tg.push(self.tg.message(chat, text, user_id=user, first_name=f"U{user}", **extra))
        async with asyncio.timeout(15):
            while len(self.sent(chat)) <= before:
                await asyncio.sleep(0.05)
        return self.sent(chat)[-1]

    def sent(self, chat: int) -> list[str]:
        return [s.plain or "" for s in self.tg.sent if str(s.chat_id) == str(chat)]

    async def ask_history(self, query: str, user: int = ALICE, chat: int | None = None) -> str:
        """The model calls history_search; what the tool answered."""
        return await self.ask_tool("history_search", {"query": query}, lambda: self.say("did I say?", user, chat))

    async def ask_tool(self, name: str, args: dict[str, Any], send: Any) -> str:
        self.llm.script(Reply.tool_calls([Call(name, args)]), Reply.text("ok"))
        sent = len(self.llm.requests)
        await send()
        return tool_result(self.llm.requests[sent + 1].body)


def tool_result(body: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in reversed(body["messages"]) if m["role"] == "tool")


@pytest.fixture
async def emb() -> AsyncIterator[FakeEmbeddings]:
    async with FakeEmbeddings() as fake:
        yield fake


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture(params=["sqlite", "postgres"])
async def bed(request: pytest.FixtureRequest, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram,
              emb: FakeEmbeddings) -> AsyncIterator[Bed]:
    if request.param == "sqlite":
        b = Bed(tmp_path, llm, tg, emb, None)
        yield b
        await b.stop()
    else:
        async with fresh_database() as url:
            b = Bed(tmp_path, llm, tg, emb, url)
            yield b
            await b.stop()


async def test_a_fact_before_new_and_one_compacted_away_are_found(bed: Bed) -> None:
    await bed.start()
    await bed.say(FACT)
    assert "fresh conversation" in await bed.say("/new")
    found = await bed.ask_history("favourite book")
    assert "Dune by Frank Herbert" in found and "session 1" in found and "UTC" in found
    await bed.say("The venue for the party is the Blue Hall on March 12")
    await bed.say("noted?")
    bed.llm.script(Reply.text("NO_REPLY"), Reply.text("They talked about a party."))  # the flush, the summary
    assert (await bed.say("/compact")).startswith("Compacted")
    found = await bed.ask_history("venue party")
    assert "Blue Hall" in found
    assert "Blue Hall" in await bed.say("/search Blue Hall venue")  # people search too


async def test_a_linked_person_finds_on_discord_what_they_said_on_telegram_and_nobody_else_does(bed: Bed) -> None:
    app = await bed.start()
    await bed.say(FACT)
    # Bob, in his own DM, and the group: nothing
    assert "Nothing in your conversations" in await bed.ask_history("Dune Herbert", user=BOB)
    assert "Nothing in this group's conversation" in await bed.ask_history("Dune Herbert", user=BOB, chat=GROUP)
    assert "Nothing" in await bed.ask_history("Dune Herbert", user=ALICE, chat=GROUP)  # Alice in the group too
    # Alice on Discord
    bed.llm.script(Reply.tool_calls([Call("history_search", {"query": "Dune Herbert"})]), Reply.text("ok"))
    sent = len(bed.llm.requests)
    await bed.discord.inject(dm("which book?", ALICE_DISCORD, platform="discord"))
    await bed.discord.wait_for_replies(1, timeout=15)
    found = tool_result(bed.llm.requests[sent + 1].body)
    assert "Dune by Frank Herbert" in found and "on telegram" in found
    # what a group says stays the group's
    await bed.say("Our group secret is zebrafish", user=BOB, chat=GROUP)
    assert "zebrafish" in await bed.ask_history("zebrafish", user=ALICE, chat=GROUP)
    assert "Nothing" in await bed.ask_history("zebrafish", user=ALICE)
    assert app.capabilities["recall"] is not None


def write_memory(bed: Bed, text: str) -> Path:
    folder = bed.tmp / "workspaces" / "telegram-42"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "MEMORY.md").write_text(text)
    return folder


MEMORY = """# Plans

## Party
The celebration will be held at the Blue Hall.

## Pets
Our dog is called Rex.
"""


async def test_memory_by_meaning_is_embedded_once_charged_recalled_and_forgotten(bed: Bed) -> None:
    app = await bed.start(f'{{embeddings: {{enabled: true, base_url: "{bed.emb.base_url}", api_key: k, '
                          f'dimensions: 64}}, auto_recall: 2}}')
    write_memory(bed, MEMORY)
    assert "words and meaning" in await bed.say("/status")
    found = await bed.ask_tool("memory_search", {"query": "where is the gathering"},
                               lambda: bed.say("where is it?"))
    assert found.startswith("MEMORY.md:3-4 (by meaning)") and "Blue Hall" in found
    embedded = len(bed.emb.inputs)
    assert embedded >= 3  # the passages (auto-recall embedded them first) and the queries
    passages_at_first = sum(1 for t in bed.emb.inputs if "Blue Hall" in t)
    # unchanged files are not embedded again, the queries only
    await bed.ask_tool("memory_search", {"query": "pets"}, lambda: bed.say("and the dog?"))
    assert sum(1 for t in bed.emb.inputs if "Blue Hall" in t) == passages_at_first == 1
    # auto-recall: the passage is in the request, marked, before the person's words
    sent = len(bed.llm.requests)
    bed.llm.script(Reply.text("Noted."))  # the fake's echo would repeat the block
    await bed.say("where will the festivity take place?")
    first = bed.llm.requests[sent].body["messages"][-1]
    content = json.dumps(first["content"])
    assert "<recalled-memory" in content and "not instructions" in content
    assert 'source=\\"MEMORY.md:3-4\\"' in content
    # charged to the person, in the budget's table
    assert any(r[0] == "person:alice" and r[1] > 0 for r in await app.store.read(_charges()))  # linked: one budget
    # the recalled block is never in the history index
    assert "Nothing" in await bed.ask_history("celebration Blue Hall")
    # forget removes the messages, the passages and the vectors
    done = await forget_person(app.store, "main", "alice", {"alice": ("telegram:42", "discord:7")})
    assert done.messages > 0 and done.passages > 0
    assert await app.store.read(_left()) == (0, 0)
    assert "Nothing" in await bed.ask_history("favourite dog")


def _charges() -> Any:
    from bot.store.op import rows

    found = yield from rows("SELECT person, tokens FROM charges WHERE run_id LIKE '%-embeddings'")
    return found


def _left() -> Any:
    from bot.store.op import value

    messages = yield from value("SELECT COUNT(*) FROM messages m JOIN sessions s ON s.id = m.session_id"
                                " WHERE s.key LIKE 'agent:main:telegram:dm:42%'")
    passages = yield from value("SELECT COUNT(*) FROM recall_passages WHERE workspace = 'telegram-42'")
    return int(messages), int(passages)
