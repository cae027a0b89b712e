"""WhatsApp's customer-service window: a free-form message reaches a person only within 24
hours of the last message they sent; outside it, only an approved template does. Pure.

``Windows`` keeps, per chat, when the person last wrote (a message's own timestamp) and
whether WhatsApp said the window is closed (a ``131047`` failure). The channel asks the store
(``recalled``) about a person it has not heard within the 24 hours: their messages from before a
restart, or heard by another instance. What neither knows counts as open: the send is tried,
and a ``131047`` status closes it for the next one.

A message outside the window goes as the template configured for its target's purpose
(``kind_of``): ``templates.reminder`` for a reminder, ``templates.task`` for anything else (a
task's answer, a notice, an answer that comes late); the message's text is the template's one
body variable, on one line (WhatsApp refuses a variable with line breaks, tabs or more than
four spaces in a row) and at most ``PARAM_LIMIT`` characters.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from bot.messages import Purpose

WINDOW = 24 * 3600.0
PARAM_LIMIT = 1024
_REMEMBERED = 100_000
_SPACES = re.compile(r"\s+")

Kind = Literal["reminder", "task"]


class Windows:
    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._last: OrderedDict[str, float] = OrderedDict()  # chat -> when the person last wrote
        self._closed: OrderedDict[str, float] = OrderedDict()  # chat -> when WhatsApp said its window closed

    def heard(self, chat: str, at: float) -> None:
        if at >= self._last.get(chat, float("-inf")):
            self._last[chat] = at
            self._last.move_to_end(chat)
        self._closed.pop(chat, None)
        while len(self._last) > _REMEMBERED:
            self._closed.pop(self._last.popitem(last=False)[0], None)

    def recalled(self, chat: str, at: float) -> None:
        """The store says the person last wrote ``at``: heard, if that is newer than what is known and
        than WhatsApp's closing ``131047`` (which stands for the messages before it, as WhatsApp counts
        them: after a restart too, when this process knew nothing of the chat before)."""
        if at > self._last.get(chat, float("-inf")) and at > self._closed.get(chat, float("-inf")):
            self.heard(chat, at)

    def close(self, chat: str) -> None:
        """WhatsApp said the window is closed (``131047``)."""
        self._closed[chat] = self._clock()
        self._closed.move_to_end(chat)
        while len(self._closed) > _REMEMBERED:
            self._closed.popitem(last=False)

    def is_open(self, chat: str) -> bool:
        if chat in self._closed:
            return False
        last = self._last.get(chat)
        return last is None or self._clock() - last < WINDOW

    def open_as_heard(self, chat: str) -> bool:
        """Open by a message heard here within the 24 hours (not by not knowing)."""
        last = self._last.get(chat)
        return chat not in self._closed and last is not None and self._clock() - last < WINDOW

    def ends(self, chat: str) -> float | None:
        """When the window closes, where known."""
        last = self._last.get(chat)
        return None if last is None or chat in self._closed else last + WINDOW


def kind_of(purpose: Purpose) -> Kind:
    """The template a message of ``purpose`` goes as outside the window."""
    return "reminder" if purpose is Purpose.REMINDER else "task"


def one_line(text: str) -> str:
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= PARAM_LIMIT else flat[:PARAM_LIMIT - 1] + "…"


def template_payload(name: str, language: str, text: str) -> dict[str, Any]:
    return {"type": "template", "template": {
        "name": name, "language": {"code": language},
        "components": [{"type": "body", "parameters": [{"type": "text", "text": one_line(text)}]}]}}
