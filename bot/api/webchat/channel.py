"""The web chat's channel: the API's exchange channel with buttons (``Asks``: approvals) and
HTML as its dialect. A press comes back through the intake like any platform's press."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from bot.api.channel import SHAPE, ExchangeChannel, Item
from bot.api.webchat.dialect import HTML
from bot.channels import Choice
from bot.messages import InboundMessage, Target

WEB_SHAPE = SHAPE


class WebChannel(ExchangeChannel):
    def __init__(self, *, settle: Callable[[str], Awaitable[None]] | None = None) -> None:
        super().__init__("webchat", dialect=HTML, shape=WEB_SHAPE, settle=settle)

    async def ask(self, to: Target, text: str, choices: Sequence[Choice]) -> str:
        ref = self.next_id()
        self.tell(to.chat_id, Item("ask", text, ref=ref, choices=tuple((c.id, c.label) for c in choices)))
        return ref

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        if text:
            self.tell(press.chat_id, Item("note", text))

    async def close_question(self, to: Target, question_id: str, text: str) -> None:
        self.tell(to.chat_id, Item("closed", text, ref=question_id))
