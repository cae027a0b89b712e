"""What ``chatgate init`` asks for Slack (Socket Mode: no public URL) and checks live: the bot
token with ``auth.test``, the app-level token with ``apps.connections.open``."""

from __future__ import annotations

from typing import Any

from adapters.slack.config import SlackConfig
from bot.channels import ChannelSetup, http_json
from bot.errors import ChannelError, ConfigError

WHERE = {"bot_token": "the Bot User OAuth Token (xoxb-…) from OAuth & Permissions, after Install to Workspace",
         "app_token": "an app-level token (xapp-…) with connections:write, from Basic Information > App-Level Tokens"}


async def _call(config: SlackConfig, method: str, key: str) -> dict[str, Any]:
    secret = getattr(config, key)
    token = secret.get_secret_value() if secret else ""
    status, body = await http_json("POST", f"{config.base_url.rstrip('/')}/{method}", key="channels.slack.base_url",
                                   shown=config.base_url, headers={"Authorization": f"Bearer {token}"})
    if not isinstance(body, dict):
        raise ChannelError(f"channels.slack: {method} answered HTTP {status}, not JSON")
    if not body.get("ok"):
        error = str(body.get("error"))
        if error in ("invalid_auth", "not_authed", "account_inactive", "token_revoked", "not_allowed_token_type"):
            raise ConfigError(f"channels.slack.{key}", f"Slack refused the token ({error})", f"use {WHERE[key]}")
        raise ChannelError(f"channels.slack: {method} failed ({error})")
    return body


async def probe(config: SlackConfig) -> str:
    me = await _call(config, "auth.test", "bot_token")
    if config.mode == "socket":
        await _call(config, "apps.connections.open", "app_token")
    return f"{me.get('user')} in {me.get('team')} ({me.get('user_id')})"


SETUP = ChannelSetup(
    asks=(("bot_token", WHERE["bot_token"]), ("app_token", WHERE["app_token"])),
    probe=probe, urls=("base_url",),
    owner="your member id (U…): your profile > ⋮ > Copy member ID")
