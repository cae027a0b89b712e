"""``channels.telegram``: the Telegram channel's keys (its SPEC brings this model to the config)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError

from bot.channels import ChannelConfig, Float, Int, Secret, Section, Url, secret
from bot.errors import ConfigError


def _webhook_secret(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", value.get_secret_value()):
        raise PydanticCustomError("webhook_secret", "Telegram accepts only 1 to 256 of A-Z, a-z, 0-9, _ and -")
    return value


OFFICIAL_API = "https://api.telegram.org"


class TelegramWebhook(Section):
    listen: str = "0.0.0.0"
    port: Annotated[Int, Field(ge=1, le=65535)] = 8443
    path: str = "/telegram"
    url: str | None = None  # the public https URL Telegram posts to, e.g. https://bot.example.com/telegram
    secret_token: Annotated[Secret, AfterValidator(_webhook_secret)] = secret("TELEGRAM_WEBHOOK_SECRET")


class TelegramConfig(ChannelConfig):
    user_id_pattern: ClassVar[str] = r"[1-9][0-9]{0,15}"
    user_id_hint: ClassVar[str] = "Telegram user ids are numbers such as 123456789 (ask @userinfobot), not @usernames"

    token: Secret = secret("TELEGRAM_BOT_TOKEN")
    base_url: Url = OFFICIAL_API  # the Bot API server root; /bot<token> is derived
    mode: Literal["polling", "webhook"] = "polling"
    webhook: TelegramWebhook = TelegramWebhook()
    streaming: Literal["off", "edit"] = "off"
    max_download_mb: Annotated[Float, Field(gt=0, le=2000)] = 20.0

    @model_validator(mode="after")
    def _webhook_url_is_https(self) -> TelegramConfig:
        # api.telegram.org posts only to https; a self-hosted Bot API server (--local) also to http
        url = self.webhook.url
        if url is not None and not url.startswith("https://") and self.base_url.rstrip("/") == OFFICIAL_API:
            raise ConfigError("channels.telegram.webhook.url", "must be an https:// URL",
                              "Telegram posts updates only to https; put a TLS proxy in front of the bot")
        return self

    def required_secrets(self) -> tuple[str, ...]:
        if self.mode != "webhook":
            return ("token",)
        if not self.webhook.url:
            raise ConfigError("channels.telegram.webhook.url", "missing",
                              "webhook mode needs the public https URL Telegram posts updates to")
        return ("token", "webhook.secret_token")
