"""The media pieces that are data in, data out: whether a transcript names the bot or says a
command, how long an audio file plays, what the platforms' files become, the MediaTranscription's caps
and minutes with a scripted transcriber, and the per-person audio minutes."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from adapters.discord.inbound import attachment_of
from adapters.slack.inbound import attachments_of
from bot.commands import NAMES
from bot.errors import ProviderUnavailableError
from bot.media.audio_length import seconds_of
from bot.media.minutes import AudioMinutes
from bot.media.naming import addresses, spoken_command
from bot.media.transcription import NOT_HEARD, NOT_UNDERSTOOD, MediaTranscription, TranscriptionSettings
from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender
from bot.store.op import rows
from bot.store.sqlite import SQLiteStore
from tests.fakes.audio import ogg_opus

NAMES_OF_BOT = ("chatgate_bot", "Chatgate")


@pytest.mark.parametrize(("transcript", "named"), [
    ("Hey chatgate, what's the weather?", True),
    ("chat gate what's the weather", True),  # a name heard as two words
    ("ChatGate bot, are you there", True),
    ("What's the weather, ChatGate?", True),
    ("I was chatting with Gate yesterday", False),
    ("chatgating is not a word", False),
    ("", False),
])
def test_a_transcript_addresses_the_bot_by_name(transcript: str, named: bool) -> None:
    assert addresses(transcript, NAMES_OF_BOT) is named


def test_names_too_short_to_mean_anything_never_match() -> None:
    assert not addresses("ai ai ai", ("AI",)) and not addresses("anything", ())


@pytest.mark.parametrize(("transcript", "command"), [
    ("Stop.", "/stop"),
    ("stop!", "/stop"),
    ("Help?", "/help"),
    ("Slash voice on.", "/voice on"),
    ("slash stop", "/stop"),
    ("/new", "/new"),
    ("New.", None),  # only a few commands count when said alone
    ("stop the music", None),
    ("slash dance", None),
    ("please stop", None),
])
def test_a_spoken_command_is_the_command_as_typed(transcript: str, command: str | None) -> None:
    assert spoken_command(transcript, NAMES) == command


def wav(seconds: float, rate: int = 8000) -> bytes:
    data = b"\0\0" * int(seconds * rate)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + struct.pack("<I", len(data)) + data)


def wav_of(fmt: bytes, data: bytes, declared: int | None = None) -> bytes:
    size = len(data) if declared is None else declared
    return (b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE" + b"fmt "
            + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", size) + data)


def opus_pages(packets: int, granule_seconds: float) -> bytes:
    """An Ogg/Opus stream of ``packets`` 20 ms CELT packets (TOC 0xF8) whose last granule says otherwise."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 312, 48000, 0, 0)  # pre-skip 312 samples
    pages, sequence = [ogg_page(0, [head], 0, 2)], 1
    for first in range(0, packets, 200):
        count = min(200, packets - first)
        last = first + count >= packets
        granule = int(granule_seconds * 48000) if last else (first + count) * 960
        pages.append(ogg_page(granule, [b"\xf8\x01\x02"] * count, sequence, 4 if last else 0))
        sequence += 1
    return b"".join(pages)


def ogg_page(granule: int, packets: list[bytes], sequence: int, header_type: int) -> bytes:
    lacing = b"".join(bytes([255] * (len(p) // 255) + [len(p) % 255]) for p in packets)
    return (b"OggS" + struct.pack("<BBqIIIB", 0, header_type, granule, 7, sequence, 0, len(lacing)) + lacing
            + b"".join(packets))


PCM = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)


@pytest.mark.parametrize(("data", "seconds"), [
    (ogg_opus("hello", 3.5), 3.5),
    (wav(2.0), 2.0),
    (wav_of(struct.pack("<HHIIHH", 1, 1, 8000, 100_000_000, 2, 16), b"\0" * 32000), 2.0),  # byte_rate lies
    (wav_of(PCM, b"\0" * 32000, declared=16), 2.0),  # the data size lies: the bytes present count
    (wav_of(PCM, b"\0" * 16000, declared=0xFFFFFFFF), 1.0),  # a stream's "unknown" size, cut short
    (wav_of(struct.pack("<HHIIHH", 1, 2, 44100, 176400, 4, 16), b"\0" * 176400), 1.0),  # CD stereo
    (wav_of(struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2000, 16), b"\0" * 32000), None),  # block align lies
    (wav_of(struct.pack("<HHIIHH", 0x11, 1, 8000, 4055, 256, 4), b"\0" * 4055), None),  # IMA ADPCM: compressed
    (wav_of(struct.pack("<HHIIHH", 1, 1, 0, 0, 2, 16), b"\0" * 100), None),
    (opus_pages(500, 10.0), 10.0 - 312 / 48000),  # 500 packets of 20 ms: 10 s, as the granule says
    (opus_pages(3000, 1.0), 60.0 - 312 / 48000),  # 60 s of packets, the granule says 1 s: the packets count
    (b"ID3\x03mp3 data", None),
    (b"OggS" + b"\0" * 30, None),  # Ogg, but not Opus
    (b"", None),
])
def test_how_long_an_audio_file_plays(data: bytes, seconds: float | None) -> None:
    assert seconds_of(data) == (pytest.approx(seconds) if seconds is not None else None)


def test_platform_files_become_voice_notes_and_audio_with_their_length() -> None:
    voice = SimpleNamespace(filename="voice-message.ogg", content_type="audio/ogg", size=9, url="https://cdn/v",
                            duration=4.5, is_voice_message=lambda: True)
    song = SimpleNamespace(filename="song.mp3", content_type="audio/mpeg", size=9, url="https://cdn/s", duration=None,
                           is_voice_message=lambda: False)
    assert (attachment_of(voice).kind, attachment_of(voice).duration) == (AttachmentKind.VOICE, 4.5)
    assert (attachment_of(song).kind, attachment_of(song).duration) == (AttachmentKind.AUDIO, None)
    clip, memo = attachments_of({"files": [
        {"id": "F1", "name": "audio_message.webm", "mimetype": "audio/webm", "subtype": "slack_audio",
         "duration_ms": 6500, "url_private_download": "https://files.slack.com/a"},
        {"id": "F2", "name": "memo.m4a", "mimetype": "audio/mp4", "url_private_download": "https://files.slack.com/b"}]})
    assert (clip.kind, clip.duration) == (AttachmentKind.VOICE, 6.5)
    assert (memo.kind, memo.duration) == (AttachmentKind.AUDIO, None)


@dataclass
class Said:
    text: str
    seconds: float | None = None


class Transcriber:
    def __init__(self, *replies: Said | Exception) -> None:
        self.replies = list(replies)
        self.calls: list[str] = []

    async def transcribe(self, data: bytes, filename: str, mime_type: str | None, *, model: str) -> Said:
        self.calls.append(filename)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply




def note(duration: float | None = None, size: int | None = None) -> Attachment:
    return Attachment(AttachmentKind.VOICE, "voice-1.ogg", "audio/ogg", size, duration=duration)


async def test_the_listener_hears_within_its_caps_and_counts_minutes_once_heard(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        await _hears_within_its_caps(store)


async def _hears_within_its_caps(store: SQLiteStore) -> None:
    minutes = AudioMinutes(1, store)
    transcriber = Transcriber(Said("  hello   there "), ProviderUnavailableError("down"), Said(""), Said("x", 9.0))
    transcription = MediaTranscription(transcriber, TranscriptionSettings("whisper-1", max_seconds=60, max_bytes=1000),
                                       minutes)
    heard = await transcription.transcribe(note(), ogg_opus("hello", 20), ("t:1",))
    assert (heard.text, heard.refusal, heard.seconds) == ("hello there", None, 20.0)
    assert (await transcription.transcribe(note(), ogg_opus("x", 5), ("t:1",))).refusal == NOT_UNDERSTOOD
    assert (await transcription.transcribe(note(), ogg_opus("x", 5), ("t:1",))).refusal == NOT_HEARD  # counted: it was heard
    assert (await transcription.transcribe(note(), b"mp3", ("t:1",))).seconds == 9.0  # what the endpoint billed
    assert await store.read(rows("SELECT person, seconds FROM audio_use ORDER BY id")) == \
        [("t:1", 20.0), ("t:1", 5.0), ("t:1", 9.0)]
    refused = await transcription.transcribe(note(), ogg_opus("x", 30), ("t:1",))  # 26 s left today
    assert refused.refusal is not None and "26 s of audio you have left" in refused.refusal
    assert (await transcription.transcribe(note(duration=61), b"", ("t:1",))).refusal == \
        "That voice message is 61 s long; I can take up to 60 s."
    assert (await transcription.transcribe(note(), b"x" * 1001, ())).refusal is not None  # bigger than max_bytes
    assert len(transcriber.calls) == 4  # refused ones were never sent


def test_only_a_group_voice_note_without_a_caption_that_did_not_address_the_bot_may_name_it() -> None:
    transcription = MediaTranscription(Transcriber(), TranscriptionSettings("m"))

    def msg(chat_type: ChatType, text: str = "", addressed: bool = False, *atts: Attachment) -> InboundMessage:
        return InboundMessage("telegram", "b", "-1", chat_type, Sender("7"), text, "1", addressed,
                              attachments=atts or (note(),))

    assert transcription.may_address(msg(ChatType.GROUP))
    assert not transcription.may_address(msg(ChatType.GROUP, "a caption"))
    assert not transcription.may_address(msg(ChatType.GROUP, "", True))
    assert not transcription.may_address(msg(ChatType.DM))
    heard = Attachment(AttachmentKind.VOICE, "v.ogg", transcript="said")
    assert not transcription.may_address(msg(ChatType.GROUP, "", False, heard))  # heard already (recovered)
