"""An approval asked in an API run, answered by its person from another chat of theirs: the
API's client sees the card as text (it has no buttons to press) and the person types
``/approve <id>`` in their linked Telegram DM; someone else's ``/approve`` there changes nothing.
``chatgate run`` with the API and Telegram on, the official openai SDK and the fake Telegram."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.test_api_e2e import Bot, llm  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(90)
WRITE = Call("write_file", {"path": "note.txt", "content": "hello"}, id="w1")


async def replies_to(tg: FakeTelegram, chat: int, count: int) -> list[str]:
    await tg.wait_for(lambda: len([s for s in tg.sent if s.chat_id == chat]) >= count, timeout=15)
    return [s.plain or "" for s in tg.sent if s.chat_id == chat]


async def test_an_api_runs_approval_is_answered_from_the_persons_linked_dm(tmp_path: Path,
                                                                          llm: FakeLLM) -> None:  # noqa: F811
    async with FakeTelegram() as tg:
        bot = Bot(tmp_path, llm)
        bot.write(extra={
            "channels": {"console": {"enabled": False},
                         "telegram": {"enabled": True, "token": tg.token, "base_url": tg.api_root,
                                      "dm_policy": "allowlist", "allow_from": [42, 43]}},
            "tools": {"approval": {"write_file": "ask"}, "approval_timeout": 60},
        })
        key = await bot.key("alice")
        try:
            await bot.start()
            llm.script(Reply.tool_calls([WRITE]), Reply.text("Saved it."))
            client = bot.client(key)
            stream = await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "save hello"}], stream=True)
            content = ""
            chunks = stream.__aiter__()
            while "/deny " not in content:  # the card, as text in the answer's stream
                try:
                    chunk = await asyncio.wait_for(chunks.__anext__(), 20)
                except TimeoutError:
                    raise AssertionError(f"no card: {content!r}\n{bot.tail()}") from None
                content += "".join(c.delta.content or "" for c in chunk.choices)
            approval_id = content.split("/deny ")[1].split(".")[0].strip()
            assert "Approval needed" in content and f"/approve {approval_id}" in content
            assert not (tmp_path / "workspaces" / "alice" / "note.txt").exists()

            tg.push(tg.message(43, f"/approve {approval_id}", user_id=43))  # bob: not his to decide
            [refused] = await replies_to(tg, 43, 1)
            assert refused.startswith("Only the person who asked")
            assert not (tmp_path / "workspaces" / "alice" / "note.txt").exists()

            tg.push(tg.message(42, f"/approve {approval_id}", user_id=42))  # alice, in her Telegram DM
            assert await replies_to(tg, 42, 1) == ["Approved."]
            async for chunk in chunks:
                content += "".join(c.delta.content or "" for c in chunk.choices)
            assert content.rstrip().endswith("Saved it.")
            with sqlite3.connect(f"file:{tmp_path / 'chatgate.db'}?mode=ro", uri=True) as db:
                decided = list(db.execute("SELECT platform, outcome, decision FROM approvals WHERE id = ?",
                                          (approval_id,)))
            assert decided == [("api", "allowed", "o")]  # allowed once
            assert (tmp_path / "workspaces" / "alice" / "note.txt").read_text() == "hello"
            await client.close()
        finally:
            await bot.close()
