"""``channels.telegram``: the Telegram channel's keys (its SPEC brings this model to the config)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError

from bot.channels import ChannelConfig, Float, Int, Secret, Section, Url, secret
from bot.errors import ConfigError


def _webhook_secret(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", value.get_secret_value()):
        raise PydanticCustomError("webhook_secret", "Telegram accepts only 1 to 256 of A-Z, a-z, 0-9, _ and -")
    return value


OFFICIAL_API = "https://api.telegram.org"


class TelegramWebhook(Section):
    listen: str = Field(default="0.0.0.0", description="address and port the bot's HTTP server binds")
    port: Annotated[Int, Field(ge=1, le=65535)] = Field(default=8443, description="(put a TLS proxy in front: "
        "Telegram posts to https only)")
    path: str = Field(default="/telegram", description="the URL path the updates are posted to")
    url: str | None = Field(default=None, description="required for webhook: the public https:// URL Telegram posts to")
    secret_token: Annotated[Secret, AfterValidator(_webhook_secret)] = secret("TELEGRAM_WEBHOOK_SECRET", description=(
        "checked on every request; required for webhook; 1 to 256 of A-Z a-z 0-9 _ -"))


class TelegramConfig(ChannelConfig):
    model_config = ConfigDict(json_schema_extra={"descriptions": {
        "allow_from": "numeric user ids (find yours with /whoami), e.g. [123456789]; not @usernames: an entry that "
                      "can never match stops start-up",
        "owners": "numeric user ids that may use admin commands (/stopall), get tools.owners_only tools, and are "
                  "exempt from limits"}})
    user_id_pattern: ClassVar[str] = r"[1-9][0-9]{0,15}"
    user_id_hint: ClassVar[str] = "Telegram user ids are numbers such as 123456789 (ask @userinfobot), not @usernames"

    token: Secret = secret("TELEGRAM_BOT_TOKEN", description="required when enabled; from @BotFather")
    base_url: Url = Field(default=OFFICIAL_API, description="or a self-hosted Bot API server (the root)")
    mode: Literal["polling", "webhook"] = Field(default="polling", description="polling (long polling) | webhook")
    webhook: TelegramWebhook = Field(default=TelegramWebhook(), description="used when mode: webhook")
    streaming: Literal["off", "edit"] = Field(default="off", description="off | edit: one message edited as the "
        "answer is written")
    max_download_mb: Annotated[Float, Field(gt=0, le=2000)] = Field(default=20.0, description="larger files users "
        "send are refused with a reply")

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
