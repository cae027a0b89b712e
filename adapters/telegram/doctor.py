"""``chatgate doctor`` for Telegram: the token, live (``getMe``), and the webhook Telegram knows."""

from __future__ import annotations

import asyncio

from adapters.telegram.config import TelegramConfig
from bot.channels import Check

TIMEOUT = 15.0
BOTFATHER = "copy the token again from @BotFather (/mybots > API Token) into TELEGRAM_BOT_TOKEN"


async def doctor(config: TelegramConfig) -> list[Check]:
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError

    if config.token is None:
        return [Check.fail("telegram token", "not set", f"set channels.telegram.token: {BOTFATHER}")]
    root = config.base_url.rstrip("/")
    bot = Bot(config.token.get_secret_value(), base_url=f"{root}/bot", base_file_url=f"{root}/file/bot")
    try:
        async with asyncio.timeout(TIMEOUT):
            await bot.initialize()  # getMe
            me = bot.bot
            found = [Check.ok("telegram token", f"@{me.username} (id {me.id})")]
            if config.mode == "webhook":
                info = await bot.get_webhook_info()
                if info.url != config.webhook.url:
                    found.append(Check.warn("telegram webhook", f"Telegram posts to {info.url or 'nowhere'}",
                                            "`chatgate run` sets channels.telegram.webhook.url when it starts"))
                else:
                    found.append(Check.ok("telegram webhook", info.url))
            return found
    except InvalidToken:
        return [Check.fail("telegram token", "refused by Telegram", BOTFATHER)]
    except (TelegramError, OSError, TimeoutError) as exc:
        return [Check.fail("telegram token", f"cannot reach {config.base_url} ({exc or type(exc).__name__})",
                           "check the network, or channels.telegram.base_url")]
    finally:
        await bot.shutdown()
