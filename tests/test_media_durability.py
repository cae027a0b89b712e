"""send_file across a SIGKILL: ``chatgate run`` as a real process against the fake Telegram and
the fake LLM (see test_durability). The file is stored by reference before it is sent; a
process killed while the platform holds the upload sends it once after the restart, and the
run repeated after the restart, asking to send the same file again, finds it sent."""

from __future__ import annotations

import asyncio
import json

from tests.fakes.llm_server import Call, Reply
from tests.test_durability import DM_USER, Bot, bot, sent_to  # noqa: F401 - the process and its fixture

CSV = "name,amount\nAda,12\n"


async def test_send_file_is_delivered_once_across_a_sigkill(bot: Bot) -> None:  # noqa: F811
    tg, llm = bot.tg, bot.llm
    await bot.start()
    send = Reply.tool_calls([Call("send_file", {"path": "out/report.csv", "caption": "the report"})])
    llm.script(Reply.tool_calls([Call("write_file", {"path": "out/report.csv", "content": CSV})]), send,
               send, Reply.text("Here it is."))  # the run after the restart asks for the file again
    tg.hold("sendDocument")
    tg.push(tg.message(DM_USER, "make me a CSV", user_id=DM_USER))
    await tg.wait_for_calls("sendDocument", 1, timeout=15)  # the upload hangs...
    owed = bot.query("SELECT c.file_ref FROM chunks c JOIN answers a ON a.id = c.answer_id "
                     "WHERE a.delivered_at IS NULL AND c.file_ref IS NOT NULL")
    assert [json.loads(r[0])["path"] for r in owed] == ["out/report.csv"]  # ...stored by reference
    await bot.kill()
    tg.release("sendDocument")
    await bot.start()
    await tg.wait_for(lambda: any(s.plain == "Here it is." for s in sent_to(tg, DM_USER)), timeout=20)
    await asyncio.sleep(1.0)
    assert [(d.filename, d.data) for d in tg.documents] == [("report.csv", CSV.encode())]
    assert [s.plain for s in sent_to(tg, DM_USER)] == ["the report", "Here it is."]
    results = [m["content"] for m in llm.requests[-1].body["messages"] if m.get("role") == "tool"]
    assert results[-1] == "sent out/report.csv (19 B) to the chat"
    assert len(llm.requests) == 4
