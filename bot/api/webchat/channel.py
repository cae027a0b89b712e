"""The web chat's channel: the API's exchange channel with buttons (``Asks``: approvals) and
HTML as its dialect. A press comes back through the intake like any platform's press. What it
says is written to the thread's log first (``log``: shown again when the page is loaded), and
each thread's last items are kept, numbered, for a page whose event stream was down a while."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.api.channel import SHAPE, ExchangeChannel, Item, Question
from bot.api.people import Directory
from bot.api.webchat.dialect import HTML
from bot.messages import InboundMessage, Target

WEB_SHAPE = SHAPE
KEEP = 2000  # items kept per thread for a page that comes back (a streamed answer is many deltas)


class WebChannel(ExchangeChannel):
    def __init__(self, *, settle: Callable[[str], Awaitable[None]] | None = None, people: Directory | None = None,
                 log: Callable[[str, str, str], Awaitable[int]] | None = None) -> None:
        super().__init__("webchat", dialect=HTML, shape=WEB_SHAPE, settle=settle, people=people, keep=KEEP)
        self._log = log

    async def send(self, to: Target, text: str) -> str:
        lid = await self._log(to.chat_id, "assistant", text) if self._log is not None else 0
        ref = self.next_id()
        self.tell(to.chat_id, Item("say", text, ref=ref, lid=lid))
        return ref

    def asked(self, question: Question) -> str:
        return question.text  # its buttons are shown

    async def answer_press(self, press: InboundMessage, text: str | None = None) -> None:
        if text:
            self.tell(press.chat_id, Item("note", text))
