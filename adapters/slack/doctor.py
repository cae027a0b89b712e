"""``chatgate doctor`` for Slack: the bot token (``auth.test`` and its scopes) and, in Socket
Mode, the app-level token (``apps.connections.open``), live."""

from __future__ import annotations

import asyncio
from typing import Any

from adapters.slack.config import SlackConfig
from bot.channels import Check

TIMEOUT = 15.0
BOT_TOKEN = "copy the Bot User OAuth Token (xoxb-…) from OAuth & Permissions into SLACK_BOT_TOKEN"
APP_TOKEN = ("make an app-level token with connections:write (Basic Information > App-Level Tokens) and set "
             "SLACK_APP_TOKEN; Socket Mode must be on")


async def doctor(config: SlackConfig) -> list[Check]:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.slack.channel import NEEDED_SCOPES
    from adapters.slack.errors import error_code

    async def call(name: str, token: Any, advice: str, method: str, **kwargs: Any) -> Any:
        if token is None:
            found.append(Check.fail(name, "not set", advice))
            return None
        client = AsyncWebClient(token=token.get_secret_value(), base_url=config.base_url, retry_handlers=[])
        try:
            async with asyncio.timeout(TIMEOUT):
                return await getattr(client, method)(**kwargs)
        except SlackApiError as exc:
            found.append(Check.fail(name, f"refused by Slack ({error_code(exc)})", advice))
        except Exception as exc:  # noqa: BLE001 - aiohttp's errors, a timeout, a bad URL
            found.append(Check.fail(name, f"cannot reach {config.base_url} ({exc or type(exc).__name__})",
                                    "check the network, or channels.slack.base_url"))
        return None

    found: list[Check] = []
    auth = await call("slack bot token", config.bot_token, BOT_TOKEN, "auth_test")
    if auth is not None:
        found.append(Check.ok("slack bot token", f"{auth.get('user')} in {auth.get('team')}"))
        scopes = auth.headers.get("x-oauth-scopes") or auth.headers.get("X-OAuth-Scopes")
        missing = [s for s in NEEDED_SCOPES if scopes is not None and s not in {x.strip() for x in scopes.split(",")}]
        if missing:
            found.append(Check.fail("slack scopes", f"missing {', '.join(missing)}",
                                    "add them under OAuth & Permissions > Bot Token Scopes, then reinstall the app"))
    if config.mode == "socket":
        opened = await call("slack app token", config.app_token, APP_TOKEN, "apps_connections_open",
                            app_token=config.app_token.get_secret_value() if config.app_token else "")
        if opened is not None:
            found.append(Check.ok("slack app token", "Socket Mode connection allowed"))
    return found
