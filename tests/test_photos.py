"""A picture as a photo with its caption: ``Chunk.photo`` through the store and delivery to a
channel's ``send_photo`` (``SendsPhoto``), Telegram's sendPhoto with its fallback to a document,
and generate_image's picture arriving on Telegram, Slack, Discord and WhatsApp with its caption,
through the whole App and the real SDKs against the fakes; sent once across a failed send."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

import pytest

from adapters.telegram.photos import MAX_PHOTO, dimensions, photo_problem
from bot.backoff import Backoff
from bot.channels import SendFailed, SendsPhoto
from bot.delivery import Delivery, DeliverySettings
from bot.messages import Answer, ChatType, Chunk, Target
from bot.store.sqlite import SQLiteStore
from tests.fakes.channel import RecordingChannel
from tests.fakes.images_server import PNG, serving
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.test_channel_contract import Harness, harness  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(60)
FAST = DeliverySettings(retry_for=60.0, backoff=Backoff(base=0.01, factor=2.0, cap=0.05, jitter=False))


def png_header(width: int, height: int, pad: int = 0) -> bytes:
    """A PNG's signature and IHDR of ``width`` x ``height`` (what the size is read from), ``pad`` bytes after."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk + b"\0" * pad


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


# -- what can go as a photo -------------------------------------------------------------

def test_the_size_of_a_picture_is_read_from_its_first_bytes() -> None:
    assert dimensions(PNG) == (1, 1)
    assert dimensions(png_header(1536, 1024)) == (1536, 1024)
    assert dimensions(jpeg(640, 480)) == (640, 480)
    assert dimensions(b"GIF89a" + struct.pack("<HH", 30, 20)) == (30, 20)
    vp8x = b"RIFF\0\0\0\0WEBPVP8X" + b"\0" * 8 + (99).to_bytes(3, "little") + (49).to_bytes(3, "little")
    assert dimensions(vp8x) == (100, 50)
    assert dimensions(b"%PDF-1.4") is None and dimensions(b"\xff\xd8\xff\xda\0\x02") is None


def test_a_picture_too_big_or_oddly_shaped_for_a_photo_goes_as_a_document() -> None:
    assert photo_problem(PNG) is None and photo_problem(png_header(1024, 1536)) is None
    assert "bytes" in (photo_problem(png_header(1024, 1024, MAX_PHOTO)) or "")
    assert "together" in (photo_problem(png_header(8000, 2001)) or "")
    assert "times" in (photo_problem(png_header(2100, 100)) or "")
    assert "size can be read" in (photo_problem(b"%PDF-1.4 not a picture") or "")


# -- the store and delivery -------------------------------------------------------------

class Photos(RecordingChannel):
    """Shows photos (``SendsPhoto``); the first ``failing`` photo sends fail as a 5xx would."""

    def __init__(self, failing: int = 0) -> None:
        super().__init__("test")
        self.failing = failing
        self.photos: list[tuple[str, bytes, str]] = []
        self.tries = 0

    async def send_photo(self, to: Target, name: str, data: bytes, caption: str) -> str:
        self.tries += 1
        if self.failing:
            self.failing -= 1
            raise SendFailed("502 Bad Gateway")
        self.photos.append((name, data, caption))
        return f"p{len(self.photos)}"


def photo_answer() -> Answer:
    return Answer("img-1", "test", Target("1", ChatType.DM), (Chunk("A fox", "fox.png", PNG, photo=True),))


async def test_a_photo_chunk_is_stored_as_a_photo_and_resumed_as_one(tmp_path: Path) -> None:
    assert isinstance(Photos(), SendsPhoto) and not isinstance(RecordingChannel(), SendsPhoto)
    async with SQLiteStore(tmp_path / "chatgate.db") as store:
        await store.store_answer(photo_answer())
        voice = Answer("v-1", "test", Target("1"), (Chunk("", "a.ogg", b"OggS", voice=True), Chunk("", "f.csv", b"x")))
        await store.store_answer(voice)
        stored = {a.id: a for a in await store.undelivered()}
        assert stored["img-1"].chunks == photo_answer().chunks
        assert [(c.voice, c.photo) for c in stored["v-1"].chunks] == [(True, False), (False, False)]
        channel = Photos()  # a later process: what was stored goes as a photo
        delivery = Delivery(store, {"test": channel}, FAST)
        await delivery.resume()
        await asyncio.wait_for(delivery.wait_idle(), 5)
        assert channel.photos == [("fox.png", PNG, "A fox")]


async def test_a_photo_whose_send_failed_is_sent_once_when_the_platform_is_back(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "chatgate.db") as store:
        channel = Photos(failing=2)
        delivery = Delivery(store, {"test": channel}, FAST)
        answer = photo_answer()
        await store.store_answer(answer)
        delivery.push(answer)
        await delivery.resume()  # finds it undelivered too: still sent once
        await asyncio.wait_for(delivery.wait_idle(), 5)
        assert channel.tries == 3 and channel.photos == [("fox.png", PNG, "A fox")]
        assert await store.undelivered() == [] and await store.answer_state("img-1") == "delivered"


async def test_a_photo_goes_as_a_file_where_the_channel_shows_no_photos(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "chatgate.db") as store:
        channel = RecordingChannel()
        delivery = Delivery(store, {"test": channel}, FAST)
        await store.store_answer(photo_answer())
        await delivery.resume()
        await asyncio.wait_for(delivery.wait_idle(), 5)
        assert [s.text for s in channel.sent] == ["[file fox.png] A fox"]


# -- Telegram's sendPhoto, alone ---------------------------------------------------------

@pytest.mark.parametrize("harness", ["telegram"], indirect=True)
async def test_telegram_sends_a_photo_and_falls_back_to_a_document(harness: Harness) -> None:  # noqa: F811
    tg = harness.tg  # type: ignore[attr-defined]
    channel, _ = await harness.start_alone()
    to = Target("42")
    await channel.send_photo(to, "fox.png", PNG, "A <b>fox</b>")
    big = png_header(1024, 1024, MAX_PHOTO)
    await channel.send_photo(to, "big.png", big, "big")  # over 10 MB: a document
    await channel.send_photo(to, "strip.png", png_header(4000, 100), "strip")  # 40:1, a document
    tg.fail_next("sendPhoto", 400, description="Bad Request: PHOTO_INVALID_DIMENSIONS")
    await channel.send_photo(to, "odd.png", PNG, "odd")  # refused as a photo: a document
    shown = [(d.method, d.filename, d.caption) for d in tg.documents]
    assert shown == [("sendPhoto", "fox.png", "A <b>fox</b>"), ("sendDocument", "big.png", "big"),
                     ("sendDocument", "strip.png", "strip"), ("sendDocument", "odd.png", "odd")]
    assert tg.documents[0].data == PNG and tg.documents[1].data == big
    tg.fail_next("sendPhoto", 502)
    with pytest.raises(SendFailed) as failed:  # an outage is retried by delivery, not sent as a document
        await channel.send_photo(to, "fox.png", PNG, "again")
    assert not failed.value.permanent and len(tg.documents) == 4


# -- generate_image through the App, on every platform -----------------------------------

def draw() -> list[Reply]:
    return [Reply.tool_calls([Call("generate_image", {"prompt": "a red fox", "caption": "A **fox**"})]),
            Reply.text("Here it is.")]


def arrived(h: Harness) -> list[tuple[str, bytes, str]]:
    """(how, bytes, caption as the platform got it) of every picture the platform received."""
    if h.platform == "telegram":
        return [(d.method, d.data, d.caption or "") for d in h.tg.documents]  # type: ignore[attr-defined]
    if h.platform == "slack":
        return [("upload", u["data"], (u.get("comment") or "").replace("\u200b", ""))
                for u in h.slack.uploads.values() if u["data"] is not None]  # type: ignore[attr-defined]
    if h.platform == "discord":
        return [("message", data, s.content) for s in h.dc.sent for _, data in s.files]  # type: ignore[attr-defined]
    wa = h.wa  # type: ignore[attr-defined]
    return [(s.type, wa.uploads[s.payload[s.type]["id"]][2],
             s.payload[s.type].get("caption", "").replace("\u200b", ""))
            for s in wa.sent if s.type in ("image", "document")]


SHOWN = {"telegram": ("sendPhoto", "A <b>fox</b>"), "slack": ("upload", "A *fox*"),
         "discord": ("message", "A **fox**"), "whatsapp": ("image", "A *fox*")}


@pytest.mark.parametrize("harness", ["telegram", "slack", "discord", "whatsapp"], indirect=True)
async def test_a_made_picture_arrives_as_a_photo_with_its_caption(harness: Harness, llm: FakeLLM) -> None:  # noqa: F811
    h = harness
    async with serving() as images:
        h.extra_yaml = f'tools: {{images: {{enabled: true, base_url: "{images.base_url}"}}}}'
        if h.platform == "telegram":
            h.tg.fail_next("sendPhoto", 502)  # type: ignore[attr-defined]  # once: retried, sent once
        channel = await h.start()
        llm.script(*draw())
        await h.say("draw me a fox")
        await channel.wait(lambda: any("Here it is." in m for m in channel.messages()), timeout=20)
        how, caption = SHOWN[h.platform]
        assert arrived(h) == [(how, PNG, caption)]
        [(name, data, _)] = channel.files
        assert name.endswith(".png") and data == PNG
        assert [p.name for p in (h.tmp / "workspaces").glob("*/images/*.png")] == [name]
        if h.platform == "whatsapp":
            wa = h.wa  # type: ignore[attr-defined]
            [image] = [s for s in wa.sent if s.type == "image"]
            assert wa.uploads[image.payload["image"]["id"]][1] == "image/png"
        if h.platform == "telegram":
            calls = [c for c in h.tg.calls if c.method.lower() == "sendphoto"]  # type: ignore[attr-defined]
            assert len(calls) == 2  # the failed one and the one that went
