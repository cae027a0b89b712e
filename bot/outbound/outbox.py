"""The outbox: the one way to owe a chat a message.

Whoever owes a chat something (the intake's notices and command replies, the turn runner's
answers, notes and files, the message tool, the scheduler's reminders) goes through here: the
text is rendered for the chat's channel into an ``Answer`` (``render``), the answer is stored
(``owe``; or by the caller, together with what owes it, such as a turn or a claimed
occurrence) and then handed to delivery (``push``), which sends it exactly once.

Rendering is the end of the outbound pipeline (``chunks_for``): Markdown -> the channel's
dialect -> chunks of its message shape, or a file when there would be too many. It is
pure and done once, here: the chunks are stored as they will be sent, so a resumed
delivery sends exactly what the first attempt would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from bot.channels import Channel
from bot.conversation import Conversation
from bot.messages import Answer, Chunk, InboundMessage, Target
from bot.outbound.markdown import render
from bot.outbound.split import render_chunks, too_many

FILE_NAME = "answer.md"
FILE_NOTE = "_The full answer is long, so it is attached as a file._"
SUMMARY_CHARS = 300
EMPTY = "…"


def chunks_for(markdown: str, channel: Channel) -> tuple[Chunk, ...]:
    """The messages that carry ``markdown`` on ``channel``."""
    texts = render_chunks(markdown, channel.dialect, channel.shape)
    if not texts:
        return (Chunk(render(EMPTY, channel.dialect)),)
    if not too_many(texts, channel.shape):
        return tuple(Chunk(text) for text in texts)
    summary = markdown.strip().split("\n\n", 1)[0][:SUMMARY_CHARS]
    note = render_chunks(f"{summary}\n\n{FILE_NOTE}", channel.dialect, channel.shape)[:1]
    return (*(Chunk(text) for text in note), Chunk("", FILE_NAME, markdown.encode()))


class Stores(Protocol):
    async def store_answer(self, answer: Answer) -> None: ...


class Pushes(Protocol):
    def push(self, answer: Answer) -> None: ...


class Outbox:
    def __init__(self, store: Stores, delivery: Pushes, channels: Mapping[str, Channel]) -> None:
        self._store = store
        self._delivery = delivery
        self._channels = channels

    def render(self, platform: str, answer_id: str, target: Target, text: str, *, inbound_ids: tuple[int, ...] = (),
               draft_id: str | None = None, failed: bool = False) -> Answer:
        """``text`` (Markdown) as an answer to ``target`` on ``platform``, not stored yet."""
        channel = self._channels[platform]
        return Answer(answer_id, channel.name, target, chunks_for(text, channel), inbound_ids, draft_id, failed)

    def to(self, conversation: Conversation, answer_id: str, text: str) -> Answer:
        """``text`` as an answer owed to ``conversation``'s chat, not stored yet: the caller stores
        it with what owes it (a claimed occurrence, a paused job), then ``push``es it."""
        return self.render(conversation.platform, answer_id, conversation.target, text)

    async def owe(self, answer: Answer) -> None:
        """Store ``answer``, then hand it to delivery."""
        await self._store.store_answer(answer)
        self.push(answer)

    async def say(self, platform: str, answer_id: str, target: Target, text: str, *,
                  inbound_ids: tuple[int, ...] = (), failed: bool = False) -> None:
        """Owe ``target`` one message (rendered, stored, delivered)."""
        await self.owe(self.render(platform, answer_id, target, text, inbound_ids=inbound_ids, failed=failed))

    async def notice(self, msg: InboundMessage, text: str, inbound_ids: tuple[int, ...], kind: str, *,
                     failed: bool = False) -> None:
        """Owe the chat of ``msg`` one short message, once per message and ``kind``."""
        await self.say(msg.platform, f"{kind}-{msg.platform}-{msg.chat_id}-{msg.message_id}", Target.of(msg), text,
                       inbound_ids=inbound_ids, failed=failed)

    def push(self, answer: Answer) -> None:
        """Hand an answer already stored (with what owed it) to delivery."""
        self._delivery.push(answer)
