"""Sending to Telegram: one place for retries and fallbacks.

``Courier.call`` runs one Bot API call for a chat: a 429 waits ``retry_after`` and tries
again, network errors back off, a chat that became a supergroup is followed to its new
id, and a bot blocked by the user is logged once and treated as delivered (the answer
stays in the history). ``send_html`` and ``edit_html`` send rendered HTML, re-sending a
chunk as plain text once if Telegram still cannot parse it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from telegram import Bot, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter

from adapters.telegram.dialect import html_to_text

log = logging.getLogger(__name__)

T = TypeVar("T")
ATTEMPTS = 4
MAX_RETRY_AFTER = 120.0  # seconds; a longer flood wait is given up (the gateway logs it)


class Courier:
    def __init__(self, bot: Bot, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.bot = bot
        self._sleep = sleep
        self._migrated: dict[str, str] = {}  # group id -> the supergroup it became
        self._blocked: set[str] = set()

    def chat(self, chat_id: str) -> str:
        return self._migrated.get(chat_id, chat_id)

    async def call(self, chat_id: str, fn: Callable[[str], Awaitable[T]]) -> T | None:
        """``fn(chat_id)`` with Telegram's failure modes handled; None when the bot is blocked."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await fn(self.chat(chat_id))
            except RetryAfter as exc:
                wait = _seconds(exc.retry_after)
                if wait > MAX_RETRY_AFTER or attempt == ATTEMPTS:
                    raise
                log.info("telegram asks to wait %.0f s (chat %s)", wait, chat_id)
                await self._sleep(wait)
            except ChatMigrated as exc:
                log.info("chat %s became supergroup %s", chat_id, exc.new_chat_id)
                self._migrated[chat_id] = str(exc.new_chat_id)
            except Forbidden as exc:
                if chat_id not in self._blocked:
                    self._blocked.add(chat_id)
                    log.warning("telegram refuses to deliver to chat %s: %s", chat_id, exc.message)
                return None
            except BadRequest:
                raise  # a request Telegram will never accept: the caller decides
            except NetworkError as exc:  # includes TimedOut
                if attempt == ATTEMPTS:
                    raise
                log.info("telegram network error (attempt %d): %s", attempt, exc.message)
                await self._sleep(0.5 * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    async def send_html(self, chat_id: str, html: str, *, reply_to: int | None = None,
                        thread_id: int | None = None) -> Message | None:
        """One message; if Telegram cannot parse our HTML, the same text once as plain text."""
        params: dict[str, Any] = {"message_thread_id": thread_id}
        if reply_to is not None:
            params["reply_parameters"] = ReplyParameters(reply_to, allow_sending_without_reply=True)
        try:
            return await self.call(chat_id, lambda c: self.bot.send_message(c, html, parse_mode=ParseMode.HTML,
                                                                            **params))
        except BadRequest as exc:
            if "can't parse entities" not in exc.message.lower():
                raise
            log.warning("telegram could not parse our HTML (%s); sending plain text", exc.message)
            return await self.call(chat_id, lambda c: self.bot.send_message(c, html_to_text(html), **params))

    async def edit_html(self, chat_id: str, message_id: int, html: str) -> None:
        async def edit(c: str) -> Any:
            return await self.bot.edit_message_text(html, c, message_id, parse_mode=ParseMode.HTML)

        try:
            await self.call(chat_id, edit)
        except BadRequest as exc:
            text = exc.message.lower()
            if "message is not modified" in text:
                return
            if "can't parse entities" not in text:
                raise
            await self.call(chat_id, lambda c: self.bot.edit_message_text(html_to_text(html), c, message_id))


def _seconds(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
