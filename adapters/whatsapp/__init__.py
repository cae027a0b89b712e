"""WhatsApp: the Business Cloud API's webhooks in, WhatsApp markup out (``adapters.whatsapp.channel``).

Importing this package loads only the config model; ``build`` imports the channel (aiohttp)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.whatsapp.config import WhatsAppConfig, check
from adapters.whatsapp.setup import SETUP
from bot.channels import ChannelSpec

if TYPE_CHECKING:
    from adapters.whatsapp.channel import WhatsAppChannel

HINTS = ("WhatsApp shows a Markdown subset: **bold**, _italic_, ~~strike~~, `code`, code blocks, > quotes and "
         "lists. Links show as their address; no tables (they become monospace blocks) and no headings (use a "
         "bold line). Keep answers short: people read them on a phone.")


def build(config: WhatsAppConfig) -> WhatsAppChannel:
    from adapters.whatsapp.channel import WhatsAppChannel

    return WhatsAppChannel(config)


SPEC = ChannelSpec("whatsapp", WhatsAppConfig, build, hints=HINTS, display="WhatsApp", check=check, setup=SETUP)
