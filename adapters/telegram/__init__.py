"""The Telegram channel. Importing this package loads no SDK: ``build`` does."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from adapters.telegram.config import TelegramConfig
from adapters.telegram.doctor import doctor
from adapters.telegram.setup import SETUP
from bot.channels import Channel, ChannelSpec

HINTS = ("Telegram shows a Markdown subset: **bold**, _italic_, `code`, code blocks and links. "
         "No tables and no headings (use a bold line); keep paragraphs short.")


def build(config: TelegramConfig) -> Channel:
    with passport_unread():
        from adapters.telegram.channel import TelegramChannel

    return TelegramChannel(config)


@contextmanager
def passport_unread() -> Iterator[None]:
    """python-telegram-bot imports ``cryptography`` when it is installed (another dependency's
    extra brings it), only to decrypt Telegram Passport data, which the bot never asks for: 7.6
    MB and ~30 ms of every start. The SDK is loaded with it hidden (it then refuses Passport
    data, nothing else), and ``cryptography`` can be imported as usual afterwards."""
    hide = "cryptography" not in sys.modules
    if hide:
        sys.modules["cryptography"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        yield
    finally:
        if hide and "cryptography" in sys.modules and sys.modules["cryptography"] is None:
            del sys.modules["cryptography"]


SPEC = ChannelSpec("telegram", TelegramConfig, build, hints=HINTS, display="Telegram", doctor=doctor, setup=SETUP)
