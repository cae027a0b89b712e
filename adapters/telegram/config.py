"""``channels.telegram``: the Telegram channel's keys (its SPEC brings this model to the config)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from bot.channels import ChannelConfig, Float, Int, Secret, Section, Url, secret
from bot.errors import ConfigError


class TelegramWebhook(Section):
    listen: str = "0.0.0.0"
    port: Annotated[Int, Field(ge=1, le=65535)] = 8443
    path: str = "/telegram"
    url: str | None = None  # the public https URL Telegram posts to, e.g. https://bot.example.com/telegram
    secret_token: Secret = secret("TELEGRAM_WEBHOOK_SECRET")


class TelegramConfig(ChannelConfig):
    token: Secret = secret("TELEGRAM_BOT_TOKEN")
    base_url: Url = "https://api.telegram.org"  # the Bot API server root; /bot<token> is derived
    mode: Literal["polling", "webhook"] = "polling"
    webhook: TelegramWebhook = TelegramWebhook()
    streaming: Literal["off", "edit"] = "off"
    max_download_mb: Annotated[Float, Field(gt=0, le=2000)] = 20.0

    def required_secrets(self) -> tuple[str, ...]:
        if self.mode != "webhook":
            return ("token",)
        if not self.webhook.url:
            raise ConfigError("channels.telegram.webhook.url", "missing",
                              "webhook mode needs the public https URL Telegram posts updates to")
        return ("token", "webhook.secret_token")
