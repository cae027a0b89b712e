"""The Telegram channel. Importing this package loads no SDK: ``build`` does."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.abc import MetaPathFinder
from types import ModuleType

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
    hidden = _Hidden()
    sys.meta_path.insert(0, hidden)
    try:
        yield
    finally:
        sys.meta_path.remove(hidden)


class _Hidden(MetaPathFinder):
    """Finds ``cryptography`` (not yet imported) missing."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if name.partition(".")[0] == "cryptography":
            raise ModuleNotFoundError(f"{name} is not loaded with the Telegram SDK", name=name)


SPEC = ChannelSpec("telegram", TelegramConfig, build, hints=HINTS, display="Telegram", doctor=doctor, setup=SETUP)
