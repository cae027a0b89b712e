"""What ``chatgate init`` asks for Telegram and checks live (``ChannelSetup``): the token with
``getMe``, and the owner found by a code they send the bot in a private chat (``getUpdates``).

Plain Bot API requests (no SDK); the URL holds the token, so no failure shows it.
"""

from __future__ import annotations

import time
from typing import Any

from adapters.telegram.config import TelegramConfig
from bot.channels import ChannelSetup, http_json
from bot.errors import ChannelError, ConfigError

PAIRED = "You are this bot's owner now. chatgate answers once it runs."
REFUSED = ConfigError("channels.telegram.token", "Telegram refused the token",
                      "copy it again from @BotFather: /mybots > your bot > API Token")


async def _call(config: TelegramConfig, method: str, params: dict[str, Any] | None = None, *,
                http_timeout: float = 15.0) -> Any:
    token = config.token.get_secret_value() if config.token else ""
    root = config.base_url.rstrip("/")
    status, body = await http_json("POST", f"{root}/bot{token}/{method}", key="channels.telegram.base_url",
                                   shown=root, json=params or {}, timeout=http_timeout)
    if status in (401, 404) or not token:
        raise REFUSED
    if not isinstance(body, dict) or not body.get("ok"):
        said = body.get("description") if isinstance(body, dict) else None
        raise ChannelError(f"channels.telegram: {method} failed: {said or f'HTTP {status}'}")
    return body["result"]


async def probe(config: TelegramConfig) -> str:
    me = await _call(config, "getMe")
    return f"@{me.get('username')} (id {me.get('id')})"


async def await_code(config: TelegramConfig, code: str, seconds: float) -> str | None:
    """The user id of whoever sends ``code`` to the bot in a private chat within ``seconds``.
    Updates read meanwhile are confirmed (the bot has not run yet: none is owed an answer);
    the sender is told they are the owner."""
    deadline, offset = time.monotonic() + seconds, None
    while (left := deadline - time.monotonic()) > 0:
        wait = int(min(left, 10))
        updates = await _call(config, "getUpdates", {"offset": offset, "timeout": wait, "allowed_updates": ["message"]},
                              http_timeout=wait + 15)
        for update in updates:
            offset = int(update["update_id"]) + 1
            msg = update.get("message") or {}
            text = "".join(str(msg.get("text") or "").split()).replace("-", "").upper()
            if msg.get("chat", {}).get("type") == "private" and code in text and msg.get("from"):
                await _call(config, "getUpdates", {"offset": offset, "timeout": 0})  # confirmed: `run` won't answer it
                await _call(config, "sendMessage", {"chat_id": msg["chat"]["id"], "text": PAIRED})
                return str(msg["from"]["id"])
    return None


SETUP = ChannelSetup(
    asks=(("token", "from @BotFather: send it /newbot, pick a name and a username; it answers with the token"),),
    probe=probe, urls=("base_url",), await_code=await_code,
    owner="a number such as 123456789: ask @userinfobot, or send /whoami to the bot once it runs")
