"""The Telegram channel. Importing this package loads no SDK: ``build`` does."""

from __future__ import annotations

from adapters.telegram.config import TelegramConfig
from adapters.telegram.doctor import doctor
from adapters.telegram.setup import SETUP
from bot.channels import Channel, ChannelSpec

HINTS = ("Telegram shows a Markdown subset: **bold**, _italic_, `code`, code blocks and links. "
         "No tables and no headings (use a bold line); keep paragraphs short.")


def build(config: TelegramConfig) -> Channel:
    from adapters.telegram.channel import TelegramChannel

    return TelegramChannel(config)


SPEC = ChannelSpec("telegram", TelegramConfig, build, hints=HINTS, display="Telegram", doctor=doctor, setup=SETUP)
