"""What ``chatgate init`` asks for Discord and checks live: the token with ``/users/@me``, and
whether the Message Content intent is on (the application's flags), which ``require_mention:
false`` needs."""

from __future__ import annotations

from typing import Any

from adapters.discord.config import DiscordConfig
from bot.channels import ChannelSetup, http_json
from bot.errors import ChannelError, ConfigError

CONTENT_INTENT = (1 << 18) | (1 << 19)  # GATEWAY_MESSAGE_CONTENT, and its _LIMITED form (under 100 servers)


async def _get(config: DiscordConfig, path: str) -> dict[str, Any]:
    token = config.token.get_secret_value() if config.token else ""
    root = config.api_base.rstrip("/")
    status, body = await http_json("GET", f"{root}{path}", key="channels.discord.api_base", shown=root,
                                   headers={"Authorization": f"Bot {token}"})
    if status == 401:
        raise ConfigError("channels.discord.token", "Discord refused the token",
                          "Developer Portal > your application > Bot > Reset Token, and copy it")
    if status != 200 or not isinstance(body, dict):
        raise ChannelError(f"channels.discord: GET {path} answered HTTP {status}")
    return body


async def probe(config: DiscordConfig) -> str:
    me = await _get(config, "/users/@me")
    flags = int((await _get(config, "/oauth2/applications/@me")).get("flags") or 0)
    content = bool(flags & CONTENT_INTENT)
    if not content and not config.require_mention:
        raise ConfigError("channels.discord.require_mention", "false needs the Message Content intent",
                          "Developer Portal > Bot > Privileged Gateway Intents > Message Content Intent")
    intent = "on" if content else "off: the bot reads DMs and messages that mention it"
    return f"{me.get('username')} (id {me.get('id')}); Message Content intent {intent}"


SETUP = ChannelSetup(
    asks=(("token", "Developer Portal > New Application > Bot > Reset Token; invite it with OAuth2 > URL "
                    "Generator (scopes bot, applications.commands)"),),
    probe=probe, urls=("api_base", "gateway_url"),
    owner="User Settings > Advanced > Developer Mode on, then right-click your name > Copy User ID")
