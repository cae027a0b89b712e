"""Readiness per platform (``Connects``, read by ``/readyz``), each channel on its real SDK against
its fake: not ready until connected, ready once connected, not ready while the fake has dropped
the connection and refuses a new one, ready again once it reconnected (Slack's Socket Mode,
Discord's gateway); the webhook modes (Slack HTTP, Telegram, WhatsApp) are ready while their
endpoint listens and, for Telegram, the webhook is set."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from adapters.discord.channel import DiscordChannel
from adapters.slack.channel import SlackChannel
from adapters.slack.config import SlackConfig
from adapters.slack.dialect import SLACK
from adapters.telegram.channel import TelegramChannel
from adapters.telegram.config import TelegramConfig
from adapters.whatsapp.channel import WhatsAppChannel
from adapters.whatsapp.config import WhatsAppConfig
from bot.channels import Backoff, Connects
from bot.ops.probes import connections
from tests.fakes.channel import RecordingInbox
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.whatsapp_server import FakeWhatsApp
from tests.test_discord_channel import USER
from tests.test_discord_channel import config as discord_config

pytestmark = pytest.mark.timeout(60)


async def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    try:
        async with asyncio.timeout(timeout):
            while not (found := check()):
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {timeout} s") from None
    return found


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def slack_config(slack: FakeSlack, mode: str) -> SlackConfig:
    return SlackConfig.model_validate({
        "enabled": True, "mode": mode, "bot_token": slack.bot_token, "app_token": slack.app_token,
        "signing_secret": slack.signing_secret, "base_url": slack.base_url,
        "http": {"listen": "127.0.0.1", "port": 0}, "channels": ["*"]})


async def test_slack_socket_mode_is_ready_while_connected(slack: FakeSlack) -> None:
    channel = SlackChannel(slack_config(slack, "socket"), SLACK, ping_interval=0.5)
    assert isinstance(channel, Connects)
    assert channel.trouble() == "Socket Mode is not connected"
    await channel.start(RecordingInbox())
    try:
        assert channel.trouble() is None
        assert connections({"slack": channel}) == {"slack": True}
        slack.socket_down = True
        await slack.drop()
        await eventually(lambda: channel.trouble() is not None, "not ready once the socket closed")
        await slack.wait_for(lambda: slack.refused >= 2, timeout=15, what="two reconnections refused")
        assert channel.trouble() == "Socket Mode is not connected"
        assert connections({"slack": channel}) == {"slack": False}
        slack.socket_down = False
        await eventually(lambda: channel.trouble() is None, "ready again once reconnected")
        await slack.wait_for_ack(await slack.push(slack.event(slack.message("D1", "back?"))))  # really connected
    finally:
        await channel.stop()
    assert channel.trouble() is not None


async def test_slack_http_mode_is_ready_while_its_endpoint_listens(slack: FakeSlack) -> None:
    channel = SlackChannel(slack_config(slack, "http"), SLACK)
    assert channel.trouble() == "the endpoint is not listening"
    await channel.start(RecordingInbox())
    try:
        assert channel.trouble() is None and channel.port
    finally:
        await channel.stop()
    assert channel.trouble() == "the endpoint is not listening"


@pytest.fixture
async def dc() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


async def test_discord_is_ready_from_ready_until_the_gateway_drops(dc: FakeDiscord) -> None:
    inbox = RecordingInbox()
    channel = DiscordChannel(discord_config(dc), backoff=Backoff(0.05, 2.0, 0.1))
    assert isinstance(channel, Connects)
    assert channel.trouble() == "the gateway is not connected"
    await channel.start(inbox)
    try:
        await eventually(lambda: channel.trouble() is None, "ready after READY")
        dc.gateway_down = True
        dc.drop()
        await eventually(lambda: channel.trouble() is not None, "not ready once the gateway dropped")
        await dc.wait_for(lambda: dc.refused >= 1, timeout=20)  # reconnecting, refused
        assert channel.trouble() == "the gateway is not connected"
        dc.gateway_down = False
        await eventually(lambda: channel.trouble() is None, "ready again once it resumed")
        dc.dm(USER, "back")
        [msg] = await inbox.wait(1)
        assert msg.text == "back"
    finally:
        await channel.stop()


async def test_discord_shards_are_ready_only_all_together(dc: FakeDiscord) -> None:
    channel = DiscordChannel(discord_config(dc, shard_count=2, shards=[0, 1]))
    assert channel.trouble() == "the gateway is not connected (shard 0, 1)"
    await channel.start(RecordingInbox())
    try:
        await eventually(lambda: channel.trouble() is None, "both shards READY")
        dc.gateway_down = True
        dc.drop()
        await eventually(lambda: channel.trouble() is not None, "not ready once the shards dropped")
        dc.gateway_down = False
        await eventually(lambda: channel.trouble() is None, "ready again once both resumed")
    finally:
        await channel.stop()


async def test_telegram_webhook_mode_is_ready_once_the_webhook_is_set_and_listening(unused_tcp_port: int) -> None:
    async with FakeTelegram() as tg:
        config = TelegramConfig.model_validate({
            "enabled": True, "token": tg.token, "base_url": tg.api_root, "mode": "webhook",
            "webhook": {"listen": "127.0.0.1", "port": unused_tcp_port, "path": "/tg",
                        "url": f"http://127.0.0.1:{unused_tcp_port}/tg"}})
        channel = TelegramChannel(config)
        assert channel.trouble() == "the webhook is not set and listening"
        await channel.start(RecordingInbox())
        try:
            assert tg.webhook is not None
            assert channel.trouble() is None
        finally:
            await channel.stop()
        assert channel.trouble() == "the webhook is not set and listening"


async def test_whatsapp_is_ready_while_its_webhook_listens() -> None:
    async with FakeWhatsApp() as wa:
        config = WhatsAppConfig.model_validate({
            "enabled": True, "phone_number_id": wa.phone_number_id, "access_token": wa.token,
            "app_secret": wa.app_secret, "verify_token": wa.verify_token, "base_url": wa.base_url,
            "webhook": {"bind": "127.0.0.1:0"}})
        channel = WhatsAppChannel(config)
        assert channel.trouble() == "the webhook endpoint is not listening"
        await channel.start(RecordingInbox())
        try:
            assert channel.trouble() is None
            async with aiohttp.ClientSession() as http, http.get(
                    f"http://127.0.0.1:{channel.port}/whatsapp",
                    params={"hub.mode": "subscribe", "hub.verify_token": wa.verify_token,
                            "hub.challenge": "7"}) as response:
                assert (response.status, await response.text()) == (200, "7")  # it listens indeed
        finally:
            await channel.stop()
        assert channel.trouble() == "the webhook endpoint is not listening"
