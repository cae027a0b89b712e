"""Questions with buttons on Telegram: an inline keyboard out, callback queries in.

A question is a message with an inline keyboard whose buttons carry the choice's id as
``callback_data`` (Telegram allows 1 to 64 bytes). A press arrives as a ``callback_query``
update (``inbound.press_of`` maps it) and Telegram's client shows a spinner on the button
until the bot answers the query with answerCallbackQuery. ``Answers`` makes sure that
happens exactly once per press: the core's ``answer_press`` (its text as a short notice,
shown to the presser only), or, when the core has not answered within ``wait`` seconds,
a blank answer from the channel itself, so that the spinner always stops. A press that
comes again (an update redelivered after a restart of the poller) is answered at most once
by this process; a second answer would only be refused by Telegram ("query is too old").
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from adapters.telegram.inbound import PRESS_PREFIX
from bot.channels import Choice, Lifecycle

log = logging.getLogger(__name__)

CALLBACK_DATA_MAX = 64  # bytes of callback_data Telegram accepts
ANSWER_WITHIN = 2.0  # seconds the core has to answer a press before the channel answers it blank
PER_ROW = 2  # buttons side by side: "Allow for this session" still fits on a phone
_REMEMBERED = 4096  # presses answered, kept so that a redelivered one is not answered twice


def keyboard(choices: Sequence[Choice]) -> InlineKeyboardMarkup:
    """The inline keyboard of a question, ``PER_ROW`` buttons a row; ``ValueError`` for a choice id
    Telegram would refuse as ``callback_data`` (empty, or over 64 bytes)."""
    for choice in choices:
        size = len(choice.id.encode("utf-8"))
        if not 1 <= size <= CALLBACK_DATA_MAX:
            raise ValueError(f"choice id {choice.id!r} is {size} bytes; Telegram's callback_data takes 1 to "
                             f"{CALLBACK_DATA_MAX}")
    buttons = [InlineKeyboardButton(c.label, callback_data=c.id) for c in choices]
    return InlineKeyboardMarkup([buttons[i:i + PER_ROW] for i in range(0, len(buttons), PER_ROW)])


NO_KEYBOARD = InlineKeyboardMarkup(())  # an edit with it removes a message's buttons


def query_id(press_id: str) -> str | None:
    """The callback query id behind a press's message id; None for an id that is no press."""
    return press_id[len(PRESS_PREFIX):] if press_id.startswith(PRESS_PREFIX) else None


class Answers:
    """Each callback query answered exactly once (see the module doc)."""

    def __init__(self, bot: Bot, life: Lifecycle, *, wait: float = ANSWER_WITHIN) -> None:
        self._bot, self._life, self._wait = bot, life, wait
        self._due: dict[str, asyncio.Future[object]] = {}  # query id -> its blank answer, waiting
        self._answered: OrderedDict[str, None] = OrderedDict()

    def arrived(self, query: str) -> None:
        """A press came in: answer it blank unless the core answers within ``wait`` seconds."""
        if query in self._answered or query in self._due:
            return
        self._due[query] = self._life.spawn(self._blank_later(query), f"telegram press {query}")

    async def answer(self, query: str, text: str | None) -> None:
        """The core's answer; nothing when the press was answered already (or is unknown here and
        too old: Telegram refuses it, which is logged, not raised)."""
        if query in self._answered:
            log.debug("telegram: press %s was answered already; %r not shown", query, text)
            return
        waiting = self._due.pop(query, None)
        if waiting is not None:
            waiting.cancel()
        await self._send(query, text)

    async def _blank_later(self, query: str) -> None:
        await asyncio.sleep(self._wait)
        if self._due.pop(query, None) is not None:
            await self._send(query, None)

    async def _send(self, query: str, text: str | None) -> None:
        self._answered[query] = None
        while len(self._answered) > _REMEMBERED:
            self._answered.popitem(last=False)
        try:
            await self._bot.answer_callback_query(query, text=text or None, show_alert=False)
        except TelegramError as exc:
            log.info("telegram: answering press %s failed: %s", query, exc.message)
