"""message: confined to the chat its run serves, sent once per call, capped; through the loop."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.messages import ChatType
from bot.tools import builtin_registry
from bot.tools.message import message_tool
from tests.fakes.llm_server import Call
from tests.test_tools_loop import Loop
from tests.test_tools_loop import loop as loop  # noqa: F401  (the fixture)


@dataclass
class RecordingMessenger:
    """The gateway's part: which chat each active run serves, and what was sent there."""

    chats: dict[str, str]  # run id -> chat id
    sent: list[tuple[str, str]] = field(default_factory=list)  # (chat id, text)
    fail: bool = False
    attempts: int = 0

    async def send(self, run_id: str, text: str) -> None:
        self.attempts += 1
        if run_id not in self.chats:
            raise LookupError(run_id)
        if self.fail:
            raise ConnectionError("platform down")
        self.sent.append((self.chats[run_id], text))


def tools_with(messenger: RecordingMessenger):  # type: ignore[no-untyped-def]
    tools = builtin_registry()
    tools.register(message_tool(messenger, max_per_run=3, max_chars=100))
    return tools


async def test_message_goes_to_the_runs_own_chat_once_per_call(loop: Loop) -> None:  # noqa: F811
    messenger = RecordingMessenger({"run1": "g1"})
    result, [first, targeted, thinking, silent] = await loop.run(
        Call("message", {"text": "Working on it, 3 files to read."}, id="m1"),
        Call("message", {"text": "psst", "chat_id": "other-chat"}, id="m2"),
        Call("message", {"text": "<think>plan</think>Halfway there."}, id="m3"),
        Call("message", {"text": "NO_REPLY"}, id="m4"),
        chat_type=ChatType.GROUP, tools=tools_with(messenger))
    assert result.text == "done"
    assert first.content == "sent (1 of at most 3 in this request)"
    assert targeted.is_error and "unknown argument 'chat_id'" in targeted.content
    assert thinking.content.startswith("sent (2 of")
    assert silent.is_error and "empty" in silent.content
    assert messenger.sent == [("g1", "Working on it, 3 files to read."), ("g1", "Halfway there.")]
    assert messenger.attempts == 2


async def test_message_caps_and_failures(loop: Loop) -> None:  # noqa: F811
    messenger = RecordingMessenger({"run1": "u1"})
    _, results = await loop.run(
        *[Call("message", {"text": f"step {i}"}, id=f"m{i}") for i in range(4)],
        Call("message", {"text": "x" * 101}, id="long"),
        tools=tools_with(messenger))
    assert [r.is_error for r in results] == [False, False, False, True, True]
    assert "already sent 3 messages in this request" in results[3].content
    assert "keep it under 100" in results[4].content
    assert [t for _, t in messenger.sent] == ["step 0", "step 1", "step 2"]
    # a run the messenger does not serve (a sub-agent's) cannot send; a failed send is not retried here
    unknown = RecordingMessenger({})
    _, [refused] = await loop.run(Call("message", {"text": "hi"}, id="x"), tools=tools_with(unknown))
    assert refused.is_error and "message is not available here" in refused.content
    down = RecordingMessenger({"run3": "u1"}, fail=True)
    _, [failed] = await loop.run(Call("message", {"text": "hi"}, id="y"), tools=tools_with(down))
    assert failed.is_error and "ConnectionError" in failed.content and down.attempts == 1
