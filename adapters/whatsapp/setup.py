"""What ``chatgate init`` asks for WhatsApp (the Cloud API) and checks live: the phone number id
with the access token (the number's own record, as the channel reads it at start)."""

from __future__ import annotations

from adapters.whatsapp.config import WhatsAppConfig
from bot.channels import ChannelSetup, http_json
from bot.errors import ChannelError, ConfigError


async def probe(config: WhatsAppConfig) -> str:
    token = config.access_token.get_secret_value() if config.access_token else ""
    root = config.base_url.rstrip("/")
    status, body = await http_json("GET", f"{root}/{config.api_version}/{config.phone_number_id}",
                                   key="channels.whatsapp.base_url", shown=root,
                                   headers={"Authorization": f"Bearer {token}"},
                                   params={"fields": "display_phone_number,verified_name"})
    error = body.get("error") if isinstance(body, dict) else None
    if status == 401 or (isinstance(error, dict) and error.get("code") == 190):
        raise ConfigError("channels.whatsapp.access_token", "Meta refused the token",
                          "a System User token with whatsapp_business_messaging (Business settings > System users)")
    if 400 <= status < 500:
        raise ConfigError("channels.whatsapp.phone_number_id", f"Meta does not know {config.phone_number_id} "
                          "for this token", "the Phone number ID from WhatsApp Manager > API Setup")
    if status != 200 or not isinstance(body, dict):
        raise ChannelError(f"channels.whatsapp: the phone number lookup answered HTTP {status}")
    return f"{body.get('verified_name') or '?'} ({body.get('display_phone_number') or config.phone_number_id})"


SETUP = ChannelSetup(
    asks=(("phone_number_id", "WhatsApp Manager > API Setup > Phone number ID (not the phone number)"),
          ("access_token", "a System User token with whatsapp_business_messaging (Business settings > System users)"),
          ("app_secret", "App settings > Basic > App secret: every webhook post is checked with it"),
          ("verify_token", "any secret you make up; type the same into Meta's webhook setup")),
    probe=probe, urls=("base_url",),
    owner="your phone number with the country code, no + or spaces, such as 491701234567")
