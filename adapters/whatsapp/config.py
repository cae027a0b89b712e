"""``channels.whatsapp``: the WhatsApp Business Cloud API channel's keys (imported at every
start: pydantic and ``bot.channels`` only)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from bot.channels import ChannelConfig, Float, Secret, Section, Url, secret
from bot.errors import ConfigError

OFFICIAL_API = "https://graph.facebook.com"


def _bind(value: str) -> str:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError('a "host:port" such as "0.0.0.0:8080"')
    return value


def _version(value: str) -> str:
    if not re.fullmatch(r"v\d+\.\d+", value):
        raise ValueError('a Graph API version such as "v23.0"')
    return value


def _digits(value: Any) -> Any:
    value = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(value, str) and value and not value.isdigit():
        raise ValueError("the number's id from WhatsApp Manager > API Setup (digits), not the phone number")
    return value


class WhatsAppWebhook(Section):
    """Where Meta posts: the app's Callback URL is https://<host><path>."""

    bind: Annotated[str, AfterValidator(_bind)] = Field(default="0.0.0.0:8080", description="host:port the webhook "
        "listens on (put TLS in front)")
    path: str = Field(default="/whatsapp", description="Meta's Callback URL is https://<your host><path>")

    @property
    def host(self) -> str:
        return self.bind.rpartition(":")[0]

    @property
    def port(self) -> int:
        return int(self.bind.rpartition(":")[2])


def _template(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value  # `reminder: chatgate_reminder` is short


class Template(Section):
    """An approved message template with one body variable ({{1}}: the message's text)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9_]{1,512}$")] = Field(description="the approved template's name")
    language: str = Field(default="en", description="the language code it was approved in")


TemplateRef = Annotated[Template | None, BeforeValidator(_template)]


class WhatsAppTemplates(Section):
    """What goes out instead of a message outside the 24-hour window, by its purpose: a reminder as
    ``reminder``, anything else (a scheduled task's answer, a notice, a late answer) as ``task``."""

    reminder: TemplateRef = Field(default=None, description="a reminder's, e.g. chatgate_reminder or {name: "
        "chatgate_reminder, language: de}")
    task: TemplateRef = Field(default=None, description="anything else: a scheduled task's answer, a notice, a late "
        "answer; e.g. {name: chatgate_task, language: en}")


class WhatsAppConfig(ChannelConfig):
    """``channels.whatsapp``. WhatsApp ids are phone numbers in E.164 without the ``+``, as the
    API gives them (``allow_from: ["491701234567"]``). DMs only: the Cloud API has no groups here."""

    model_config = ConfigDict(json_schema_extra={
        "description": "the official WhatsApp Business Cloud API (DMs only)", "descriptions": {
        "group_policy": "not used: WhatsApp here is DMs only",
        "groups": "must stay empty (the Cloud API offers no groups here)",
        "require_mention": "not used (DMs only)",
        "allow_from": 'phone numbers with the country code, no + or spaces: ["491701234567"]',
        "owners": "phone numbers (as allow_from) that may use admin commands, get tools.owners_only tools, and are "
                  "exempt from limits"}})

    user_id_pattern: ClassVar[str] = r"[1-9][0-9]{6,14}"
    user_id_hint: ClassVar[str] = ("WhatsApp ids are phone numbers with the country code and without + or "
                                   "spaces, such as 491701234567")

    phone_number_id: Annotated[str, BeforeValidator(_digits)] = Field(default="", description="required when "
        "enabled: WhatsApp Manager > API Setup > Phone number ID (not the phone number)")
    access_token: Secret = secret("WHATSAPP_ACCESS_TOKEN", description="a system user's token with "
        "whatsapp_business_messaging")
    app_secret: Secret = secret("WHATSAPP_APP_SECRET", description="App settings > Basic: every webhook post's "
        "X-Hub-Signature-256 is checked with it")
    verify_token: Secret = secret("WHATSAPP_VERIFY_TOKEN", description="any secret; typed into Meta's webhook setup "
        "too")
    api_version: Annotated[str, AfterValidator(_version)] = Field(default="v23.0", description="the Graph API version")
    base_url: Url = Field(default=OFFICIAL_API, description="the Graph API root")
    webhook: WhatsAppWebhook = Field(default=WhatsAppWebhook(), description="where Meta posts the messages and "
        "statuses")
    templates: WhatsAppTemplates = Field(default=WhatsAppTemplates(), description="approved templates with one body "
        "variable {{1}}, for what is due outside the 24-hour window; null: not sent then (⚠ warns)")
    streaming: Literal["off"] = Field(default="off", description="WhatsApp cannot edit a message: an answer is sent "
        "when done")
    max_download_mb: Annotated[Float, Field(gt=0, le=100)] = Field(default=20.0, description="larger files people "
        "send are refused (at most 100)")

    def required_secrets(self) -> tuple[str, ...]:
        if not self.phone_number_id:
            raise ConfigError("channels.whatsapp.phone_number_id", "missing",
                              "the Phone number ID from WhatsApp Manager > API Setup")
        return ("access_token", "app_secret", "verify_token")


def check(config: WhatsAppConfig) -> list[str]:
    """What ``chatgate check`` reports for an enabled WhatsApp channel, one dotted-key line each."""
    if not config.enabled:
        return []
    problems = []
    wanted = (("access_token", "WHATSAPP_ACCESS_TOKEN", "a System User token with whatsapp_business_messaging"),
              ("app_secret", "WHATSAPP_APP_SECRET", "App settings > Basic > App secret"),
              ("verify_token", "WHATSAPP_VERIFY_TOKEN", "any secret you also type into the webhook setup"))
    for key, env, where in wanted:
        if getattr(config, key) is None:
            problems.append(f"channels.whatsapp.{key}: missing ({where}; set {env})")
    if not config.phone_number_id:
        problems.append("channels.whatsapp.phone_number_id: missing (WhatsApp Manager > API Setup > Phone number ID)")
    if not config.webhook.path.startswith("/"):
        problems.append(f'channels.whatsapp.webhook.path: must start with "/", got "{config.webhook.path}"')
    if config.groups:
        problems.append("channels.whatsapp.groups: WhatsApp is DMs only here; remove the groups")
    return problems
