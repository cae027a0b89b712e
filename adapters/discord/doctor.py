"""``chatgate doctor`` for Discord: the token (``/users/@me``) and, when the bot reads messages
that do not mention it, the Message Content intent (the application's flags), live."""

from __future__ import annotations

from typing import Any

from adapters.discord.config import DiscordConfig
from bot.channels import Check

TIMEOUT = 15.0
CONTENT = (1 << 18) | (1 << 19)  # GATEWAY_MESSAGE_CONTENT, GATEWAY_MESSAGE_CONTENT_LIMITED
PORTAL = "copy the bot's token again (Developer Portal > your app > Bot > Reset Token) into DISCORD_BOT_TOKEN"


async def doctor(config: DiscordConfig) -> list[Check]:
    import aiohttp

    if config.token is None:
        return [Check.fail("discord token", "not set", PORTAL)]
    base = config.api_base.rstrip("/")
    headers = {"Authorization": f"Bot {config.token.get_secret_value()}"}

    async def get(session: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
        async with session.get(f"{base}{path}", headers=headers) as response:
            return response.status, await response.json(content_type=None) if response.status == 200 else None

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session:
            status, me = await get(session, "/users/@me")
            if status == 401:
                return [Check.fail("discord token", "refused by Discord (401)", PORTAL)]
            if status != 200:
                return [Check.fail("discord token", f"Discord answered {status}", "try again later")]
            found = [Check.ok("discord token", f"{me.get('username')} (id {me.get('id')})")]
            status, app = await get(session, "/oauth2/applications/@me")
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return [Check.fail("discord token", f"cannot reach {config.api_base} ({exc or type(exc).__name__})",
                           "check the network, or channels.discord.api_base")]
    enabled = app is not None and bool(int(app.get("flags") or 0) & CONTENT)
    needed = not config.require_mention
    if app is None:
        found.append(Check.warn("discord content intent", f"application not readable ({status})",
                                "check Developer Portal > Bot > Message Content Intent by hand"))
    elif needed and not enabled:
        found.append(Check.fail("discord content intent", "off, and require_mention: false needs it",
                                "turn on Developer Portal > Bot > Privileged Gateway Intents > Message Content"))
    else:
        found.append(Check.ok("discord content intent", ("on" if enabled else "off") +
                              ("" if needed else " (not needed: the bot reads only messages that mention it)")))
    return found
