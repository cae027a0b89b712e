"""generate_image: the official openai SDK against a fake images endpoint (tests/fakes/images_server.py),
the picture saved in the workspace and handed to the chat's FileSender, the price charged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from bot.conversation import Conversation
from bot.images.config import ImagesConfig
from bot.images.generate import image_tool
from bot.limits import LimitSettings, PersonLimits
from bot.llm import ToolCall
from bot.messages import FileRef
from bot.store.base import Charge
from bot.tools.base import ToolContext
from bot.tools.registry import ToolRegistry
from tests.fakes.images_server import PNG, FakeImages, serving

pytestmark = pytest.mark.timeout(30)


class Sender:
    """A FileSender recording what it was given (the platforms' own send_file is tested apart)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, FileRef, str]] = []
        self.photos: list[bool] = []

    def upload_limit(self, run_id: str) -> tuple[str, int]:
        return "telegram", 50 << 20

    async def send_file(self, run_id: str, ref: FileRef, caption: str, *, photo: bool = False) -> str | None:
        self.sent.append((run_id, ref, caption))
        self.photos.append(photo)
        return None


class Bed:
    def __init__(self, root: Path, fake: FakeImages, price: float = 0.04) -> None:
        self.root, self.fake = root, fake
        self.sender = Sender()
        self.charged: list[tuple[str, Sequence[Charge]]] = []
        self.client = AsyncOpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
        self.tools = ToolRegistry()
        self.tools.register(image_tool(self.client, model="gpt-image-1", size="1024x1024", quality="medium",
                                       price=price, sender=self.sender, charge=self._charge))

    async def _charge(self, run_id: str, charges: Sequence[Charge]) -> None:
        self.charged.append((run_id, charges))

    def ctx(self) -> ToolContext:
        return ToolContext(self.root, Conversation.of_key("agent:main:telegram:dm:1"), "run-1", "main", "1",
                           payers=("telegram:1", "telegram:2"))

    async def call(self, **arguments: Any) -> Any:
        [result] = await self.tools.execute([ToolCall("c", "generate_image", json.dumps(arguments))], self.ctx())
        return result


@pytest.fixture
async def bed(tmp_path: Path) -> AsyncIterator[Bed]:
    async with serving() as fake:
        made = Bed(tmp_path, fake)
        try:
            yield made
        finally:
            await made.client.close()


async def test_a_picture_is_made_saved_sent_with_its_caption_and_charged(bed: Bed) -> None:
    result = await bed.call(prompt="a red fox in the snow, watercolour", caption="Your fox")
    assert not result.is_error, result.content
    [request] = bed.fake.requests
    assert request["model"] == "gpt-image-1" and request["size"] == "1024x1024" and request["quality"] == "medium"
    assert request["authorization"] == "Bearer sk-test"
    [(run_id, ref, caption)] = bed.sender.sent
    assert (run_id, caption) == ("run-1", "Your fox") and bed.sender.photos == [True]  # shown as a photo
    assert ref.path.startswith("images/") and ref.path.endswith(".png")
    assert (bed.root / ref.path).read_bytes() == PNG
    [(_, charges)] = bed.charged
    assert [(c.person, round(c.cost, 3)) for c in charges] == [("telegram:1", 0.02), ("telegram:2", 0.02)]
    assert "sent to the chat" in result.content


async def test_a_refusal_is_told_in_one_sentence_and_not_charged(bed: Bed) -> None:
    result = await bed.call(prompt="please refuse this")
    assert result.is_error
    assert result.content == ("The image service refused this request: Your request was rejected by the safety "
                              "system.")
    assert bed.sender.sent == [] and bed.charged == []


async def test_stop_cancels_the_request_in_flight(bed: Bed) -> None:
    call = asyncio.ensure_future(bed.tools.execute(
        [ToolCall("c", "generate_image", json.dumps({"prompt": "a slow picture"}))], bed.ctx()))
    while not bed.fake.requests:
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(bed.fake.slow_gone.wait(), 5)  # the endpoint saw the request go
    assert bed.sender.sent == [] and bed.charged == []


async def test_the_charge_counts_in_the_daily_budget() -> None:
    class Usage:
        async def usage_since(self, person: str, since: float) -> tuple[int, float]:
            return 0, 0.0

        async def bot_usage_since(self, since: float) -> tuple[int, float]:
            return 0, 0.0

    limits = PersonLimits(LimitSettings(daily_cost_usd=0.05), Usage())
    assert await limits.check("telegram:1") is None
    limits.charge([Charge("telegram:1", 0, 0.06)])
    refusal = await limits.check("telegram:1")
    assert refusal is not None and refusal.reason == "cost"


def test_the_price_table_is_overridable() -> None:
    assert ImagesConfig().price() == 0.042
    assert ImagesConfig(prices={"gpt-image-1": 0.1}).price() == 0.1
    assert ImagesConfig(model="my-own").price() == 0.0


# -- through the app: the picture reaches the platform with its caption, the charge is stored --

async def test_a_picture_arrives_on_telegram_and_slack_with_its_caption(tmp_path: Path) -> None:
    from adapters.slack.channel import SlackChannel
    from adapters.slack.dialect import SLACK
    from adapters.telegram.channel import TelegramChannel
    from bot.app import App
    from bot.settings import load_config
    from tests.fakes.llm_server import Call, FakeLLM, Reply
    from tests.fakes.slack_server import FakeSlack
    from tests.fakes.telegram_server import FakeTelegram
    from tests.test_media_files import config_text

    def script() -> list[Reply]:
        return [Reply.tool_calls([Call("generate_image", {"prompt": "a red fox", "caption": "A **fox**"})]),
                Reply.text("Here it is.")]

    images = "tools: {images: {enabled: true, base_url: \"%s\"}}\n"
    async with serving() as fake, FakeLLM() as llm, FakeTelegram() as tg, FakeSlack() as slack:
        path = config_text(tmp_path, llm, f"""  telegram: {{enabled: true, token: "{tg.token}",
              base_url: "{tg.api_root}", dm_policy: open}}
  slack: {{enabled: true, mode: socket, bot_token: "{slack.bot_token}", app_token: "{slack.app_token}",
           signing_secret: "{slack.signing_secret}", base_url: "{slack.base_url}", dm_policy: open}}""")
        path.write_text(path.read_text() + images % fake.base_url)
        config = load_config(path, env={})
        app = App(config, {"telegram": TelegramChannel(config.channels.telegram),  # type: ignore[arg-type]
                           "slack": SlackChannel(config.channels.slack, SLACK)})  # type: ignore[attr-defined]
        await app.__aenter__()
        try:
            llm.script(*script())
            tg.push(tg.message(42, "draw me a fox", user_id=42))
            await tg.wait_for(lambda: len(tg.sent) >= 2, timeout=10)
            (doc,) = tg.documents
            assert doc.data == PNG and doc.filename.endswith(".png") and doc.caption == "A <b>fox</b>"
            assert doc.method == "sendPhoto"
            llm.script(*script())
            await slack.wait_for_ack(await slack.push(slack.event(slack.message("D1", "draw me a fox"))))
            await slack.wait_for(lambda: any(p.text == "Here it is." for p in slack.posts), what="the answer")
            (upload,) = [u for u in slack.uploads.values() if u["data"] is not None]
            assert upload["data"] == PNG and upload["comment"].replace("\u200b", "") == "A *fox*"
            tokens, cost = await app.store.usage_since("telegram:42", 0)  # type: ignore[attr-defined]
            assert cost >= 0.042  # the picture's price, beside the fake model's calls
        finally:
            await app.__aexit__(None, None, None)
