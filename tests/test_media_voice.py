"""Voice notes in and voice answers out on Telegram, end to end: the real python-telegram-bot
against the fake Bot API, the real openai SDK against the fake LLM and the fake audio server
(tests/fakes/audio.py), the whole App in between."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.channel import TelegramChannel
from bot.app import App
from bot.media import ops as media_ops
from bot.settings import load_config
from tests.fakes.audio import FakeAudio, Heard, ogg_opus
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram

GROUP = -1001234567890
DM = 42


class Stack:
    def __init__(self, tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, audio: FakeAudio) -> None:
        self.tmp_path, self.llm, self.tg, self.audio = tmp_path, llm, tg, audio
        self.app: App | None = None
        self._voices = 0

    async def start(self, media: str = "", limits: str = "", *, transcription: str = "", speech: str = "") -> App:
        """``transcription`` / ``speech``: more keys of those sections; ``media``: more lines under media:."""
        path = self.tmp_path / "config.yaml"
        path.write_text(f"""
agent: {{model: fake-model}}
providers: {{openai: {{api_key: test-key, base_url: "{self.llm.openai_base_url}"}}}}
storage: {{path: "{self.tmp_path / 'chatgate.db'}"}}
workspace: {{root: "{self.tmp_path / 'workspaces'}"}}
limits: {{messages_per_minute: null {', ' + limits if limits else ''}}}
media:
  transcription: {{enabled: true, base_url: "{self.audio.base_url}", api_key: audio-key {transcription}}}
  speech: {{enabled: true, base_url: "{self.audio.base_url}", api_key: audio-key, voice: nova {speech}}}
  {media}
channels:
  telegram: {{enabled: true, token: "{self.tg.token}", base_url: "{self.tg.api_root}",
              dm_policy: open, group_policy: open}}
""")
        config = load_config(path, env={})
        app = App(config, {"telegram": TelegramChannel(config.channels.telegram)})  # type: ignore[arg-type]
        await app.__aenter__()
        self.app = app
        return app

    def voice(self, chat_id: int, said: str, *, seconds: float = 3.0, user_id: int = DM, caption: str | None = None,
              duration: float | None = None, **options: Any) -> dict[str, Any]:
        """A voice-note update saying ``said``; its file known to getFile."""
        self._voices += 1
        file_id = f"VOICE-{self._voices}"
        data = ogg_opus(said, seconds)
        self.tg.add_file(file_id, data, file_path=f"voice/file_{self._voices}.oga")
        voice = {"file_id": file_id, "duration": int(duration if duration is not None else seconds),
                 "mime_type": "audio/ogg", "file_size": len(data)}
        return self.tg.message(chat_id, None, user_id=user_id, voice=voice, caption=caption, **options)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with FakeLLM() as llm, FakeTelegram() as tg, FakeAudio() as audio:
        s = Stack(tmp_path, llm, tg, audio)
        try:
            yield s
        finally:
            if s.app is not None:
                await s.app.__aexit__(None, None, None)


def prompt(llm: FakeLLM, index: int = -1) -> str:
    return json.dumps(llm.requests[index].body["messages"])


def said(plain: str | None) -> str:
    """The echo's first paragraph: the fake LLM echoes the whole user turn, the note on the saved audio too."""
    return (plain or "").split("\n\n")[0]


def calls(tg: FakeTelegram, method: str) -> int:
    return len([c for c in tg.calls if c.method == method])


async def no_more_typing(tg: FakeTelegram) -> None:
    await asyncio.sleep(0.3)  # a typing request already in flight may still land
    typing = len(tg.actions)
    await asyncio.sleep(4.5)  # "typing…" is refreshed every 4 s while anything is under way
    assert len(tg.actions) == typing


async def test_a_voice_note_is_answered_from_its_transcript(stack: Stack) -> None:
    await stack.start()
    tg, llm, audio = stack.tg, stack.llm, stack.audio
    tg.push(stack.voice(DM, "what time is it in Lisbon?"))
    (sent,) = await tg.wait_for_sent(1, timeout=10)
    assert said(sent.plain) == "echo: what time is it in Lisbon?"
    (heard,) = audio.transcriptions
    assert heard.model == "whisper-1" and heard.data == ogg_opus("what time is it in Lisbon?", 3.0)
    saved = list((stack.tmp_path / "workspaces" / f"telegram-{DM}" / "inbox").glob("voice-*.ogg"))
    assert len(saved) == 1 and saved[0].read_bytes() == heard.data  # the audio stays in the inbox
    assert f"inbox/{saved[0].name}; its transcript is the text above" in prompt(llm)
    assert len(llm.requests) == 1 and not audio.speeches  # /voice is off until asked


async def test_echo_transcript_shows_what_was_heard_before_the_answer(stack: Stack) -> None:
    await stack.start(media="echo_transcript: true")
    stack.tg.push(stack.voice(DM, "remind me to call Ana"))
    heard, answer = await stack.tg.wait_for_sent(2, timeout=10)
    assert heard.plain == "🎙️ Heard: “remind me to call Ana”"
    assert said(answer.plain) == "echo: remind me to call Ana"


async def test_stop_spoken_during_a_run_stops_it(stack: Stack) -> None:
    await stack.start()
    tg, llm = stack.tg, stack.llm
    llm.script(Reply.hang())
    tg.push(tg.message(DM, "write me an essay", user_id=DM))
    await llm.wait_for_requests(1, timeout=5)
    tg.push(stack.voice(DM, "Stop."))
    (sent,) = await tg.wait_for_sent(1, timeout=10)
    assert sent.plain == "Stopped."
    await asyncio.wait_for(llm.requests[0].disconnected.wait(), 2)
    await asyncio.sleep(0.5)
    assert len(llm.requests) == 1 and len(tg.sent) == 1  # the spoken stop is a command, not a turn


async def test_a_spoken_command_works_as_typed(stack: Stack) -> None:
    await stack.start()
    stack.tg.push(stack.voice(DM, "Slash voice auto."))
    (sent,) = await stack.tg.wait_for_sent(1, timeout=10)
    assert sent.plain.startswith("Voice answers are on auto") and not stack.llm.requests


async def test_a_group_voice_note_naming_the_bot_is_answered_and_one_that_does_not_is_kept_as_context(
        stack: Stack) -> None:
    await stack.start()
    tg, llm = stack.tg, stack.llm
    tg.push(stack.voice(GROUP, "I think we should order pizza", user_id=7))
    await stack.audio.wait_for_calls(1)
    await asyncio.sleep(0.5)
    assert not tg.sent and not llm.requests and not tg.actions  # not addressed: heard, kept, unanswered
    trigger = tg.push(stack.voice(GROUP, "Hey chatgate, what should we order?", user_id=8))
    (sent,) = await tg.wait_for_sent(1, timeout=10)
    assert sent.reply_to == trigger["message"]["message_id"]
    assert "what should we order?" in sent.plain
    assert "I think we should order pizza" in prompt(llm)  # the unaddressed note came along as context
    group_inbox = stack.tmp_path / "workspaces" / f"telegram-group-{GROUP}" / "inbox"
    assert len(list(group_inbox.glob("*.ogg"))) == 1  # only the addressed note was saved
    await asyncio.sleep(0.3)
    assert len(llm.requests) == 1


@pytest.mark.parametrize(("reply", "sentence"), [
    (Heard.error(400), "Sorry, I couldn't understand your voice message; please try again, or type it."),
    (Heard(text="  "), "Sorry, I couldn't hear anything in your voice message; please try again, or type it."),
], ids=["failure", "empty"])
async def test_an_unheard_voice_note_gets_one_sentence_stops_typing_and_asks_no_model(
        stack: Stack, reply: Heard, sentence: str) -> None:
    await stack.start()
    tg = stack.tg
    stack.audio.script(reply)
    tg.push(stack.voice(DM, "mumble"))
    (sent,) = await tg.wait_for_sent(1, timeout=10)
    assert sent.plain == sentence
    assert tg.actions  # "typing…" while it was being heard
    await no_more_typing(tg)
    assert not stack.llm.requests and len(tg.sent) == 1


async def test_the_caps_refuse_before_anything_is_downloaded_or_transcribed(stack: Stack) -> None:
    await stack.start(transcription=", max_seconds: 60, max_mb: 1")
    tg = stack.tg
    tg.push(stack.voice(DM, "a very long story", seconds=3, duration=90))  # the platform says 90 s
    (sent,) = await tg.wait_for_sent(1, timeout=10)
    assert sent.plain == "That voice message is 90 s long; I can take up to 60 s."
    tg.push(tg.message(DM, None, user_id=DM, voice={"file_id": "BIG", "duration": 5, "file_size": 2 * 1024 * 1024}))
    await tg.wait_for_sent(2, timeout=10)
    assert tg.sent[1].plain == "That audio is 2.0 MB; I can transcribe files up to 1 MB."
    tg.push(stack.voice(DM, "said in two minutes", seconds=120, duration=0))  # the file itself says 120 s
    await tg.wait_for_sent(3, timeout=10)
    assert tg.sent[2].plain == "That voice message is 2 min long; I can take up to 60 s."
    assert calls(tg, "getFile") == 1 and not stack.audio.calls and not stack.llm.requests


async def test_minutes_of_audio_per_day_are_counted_per_person(stack: Stack) -> None:
    app = await stack.start(limits="audio_minutes_per_day: 0.2")  # 12 s
    tg = stack.tg
    tg.push(stack.voice(DM, "first note", seconds=8))
    await tg.wait_for_sent(1, timeout=10)
    tg.push(stack.voice(DM, "second note", seconds=8))
    await tg.wait_for_sent(2, timeout=10)
    assert tg.sent[1].plain == ("That voice message is longer than the 4 s of audio you have left today; "
                                "send a shorter one, or type instead.")
    tg.push(stack.voice(DM, "short one", seconds=4))
    await tg.wait_for_sent(3, timeout=10)
    assert said(tg.sent[2].plain) == "echo: short one"
    tg.push(stack.voice(DM, "one more", seconds=1))
    await tg.wait_for_sent(4, timeout=10)
    assert tg.sent[3].plain.startswith("You've used today's 0.2 minutes of voice messages")
    tg.push(stack.voice(DM + 1, "someone else", seconds=8, user_id=DM + 1))
    await tg.wait_for(lambda: any(s.chat_id == DM + 1 for s in tg.sent), timeout=10)
    assert [said(s.plain) for s in tg.sent if s.chat_id == DM + 1] == ["echo: someone else"]
    assert len(stack.audio.transcriptions) == 3
    assert await app.store.read(media_ops.audio_since(f"telegram:{DM}", 0)) == pytest.approx(12.0)


async def test_voice_auto_answers_a_voice_note_with_a_voice_note_and_text(stack: Stack) -> None:
    await stack.start()
    tg, audio = stack.tg, stack.audio
    tg.push(tg.message(DM, "/voice auto", user_id=DM))
    await tg.wait_for_sent(1, timeout=5)
    tg.push(tg.message(DM, "typed, so text only", user_id=DM))
    await tg.wait_for_sent(2, timeout=5)
    tg.push(stack.voice(DM, "how are you?"))
    await tg.wait_for(lambda: tg.documents, timeout=10)
    text, voice = tg.sent[2], tg.documents[0]
    assert said(text.plain) == "echo: how are you?" and text.time < voice.time  # the text first, then the voice note
    assert voice.method == "sendVoice" and voice.data.startswith(b"OggS") and b"SPOKEN:echo: how are you?" in voice.data
    (spoken,) = audio.speeches
    assert spoken.response_format == "opus" and spoken.voice == "nova" and spoken.model == "gpt-4o-mini-tts"
    await asyncio.sleep(0.3)
    assert len(tg.documents) == 1  # the typed message got no voice


async def test_voice_on_speaks_every_answer_but_not_a_long_one(stack: Stack) -> None:
    await stack.start(speech=", max_chars: 40")
    tg = stack.tg
    tg.push(tg.message(DM, "/voice on", user_id=DM))
    await tg.wait_for_sent(1, timeout=5)
    tg.push(tg.message(DM, "hi", user_id=DM))
    await tg.wait_for(lambda: tg.documents, timeout=10)
    tg.push(tg.message(DM, "tell me something long " * 5, user_id=DM))
    await tg.wait_for_sent(4, timeout=10)
    await asyncio.sleep(0.5)
    assert len(tg.documents) == 1 and len(stack.audio.speeches) == 1  # long answers are text only


def lying_wav(text: str, seconds: float, rate: int = 8000) -> bytes:
    """A 16-bit mono WAV saying ``text`` for ``seconds``, whose byte_rate claims 100 MB a second
    (a decoder ignores it: it plays sample rate x block align bytes a second)."""
    samples = bytearray(int(seconds * rate) * 2)
    word = f"SAY:{text}\0".encode()
    samples[:len(word)] = word
    fmt = struct.pack("<HHIIHH", 1, 1, rate, 100_000_000, 2, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + struct.pack("<I", len(samples)) + bytes(samples))


def audio_file(stack: Stack, data: bytes, *, duration: int, name: str, mime_type: str) -> dict[str, Any]:
    """An audio-file update (``duration``: what the sender's app claims)."""
    file_id = f"AUDIO-{len(stack.tg.files) + 1}"
    stack.tg.add_file(file_id, data, file_path=f"music/{name}")
    audio = {"file_id": file_id, "duration": duration, "mime_type": mime_type, "file_name": name,
             "file_size": len(data)}
    return stack.tg.message(DM, None, user_id=DM, audio=audio)


async def test_a_wav_whose_header_lies_is_measured_by_its_samples(stack: Stack) -> None:
    await stack.start(transcription=", max_seconds: 60")
    tg = stack.tg
    tg.push(audio_file(stack, lying_wav("a two minute speech", 120), duration=1, name="talk.wav",
                       mime_type="audio/wav"))
    (sent,) = await tg.wait_for_sent(1, timeout=10)
    assert sent.plain == "That voice message is 2 min long; I can take up to 60 s."
    assert not stack.audio.calls and not stack.llm.requests


async def test_the_minutes_count_a_lying_wav_and_what_the_endpoint_billed(stack: Stack) -> None:
    app = await stack.start(limits="audio_minutes_per_day: 1")
    tg, person = stack.tg, f"telegram:{DM}"
    tg.push(audio_file(stack, lying_wav("fifty seconds", 50), duration=1, name="a.wav", mime_type="audio/wav"))
    await tg.wait_for_sent(1, timeout=10)
    assert said(tg.sent[0].plain) == "echo: fifty seconds"
    assert await app.store.read(media_ops.audio_since(person, 0)) == pytest.approx(50.0)
    tg.push(audio_file(stack, lying_wav("twenty seconds", 20), duration=1, name="b.wav", mime_type="audio/wav"))
    await tg.wait_for_sent(2, timeout=10)
    assert tg.sent[1].plain == ("That voice message is longer than the 10 s of audio you have left today; "
                                "send a shorter one, or type instead.")
    stack.audio.script(Heard(seconds=9.0))  # the file says 3 s, the endpoint billed 9
    tg.push(stack.voice(DM, "short", seconds=3))
    await tg.wait_for_sent(3, timeout=10)
    assert await app.store.read(media_ops.audio_since(person, 0)) == pytest.approx(59.0)
    assert len(stack.audio.transcriptions) == 2


async def test_audio_whose_length_cannot_be_read_is_bounded_by_its_size_before_the_call(stack: Stack) -> None:
    await stack.start(transcription=", max_seconds: 300")
    tg = stack.tg
    small = b"ID3\x04" + b"SAY:a short song\0" + bytes(200_000)  # 200 KB: at most 100 s at 16 kbit/s
    tg.push(audio_file(stack, small, duration=20, name="song.mp3", mime_type="audio/mpeg"))
    await tg.wait_for_sent(1, timeout=10)
    assert said(tg.sent[0].plain) == "echo: a short song"
    big = b"ID3\x04" + b"SAY:a long talk\0" + bytes(1_400_000)  # it says 5 s; it may play 12 min
    tg.push(audio_file(stack, big, duration=5, name="talk.mp3", mime_type="audio/mpeg"))
    await tg.wait_for_sent(2, timeout=10)
    assert tg.sent[1].plain == ("I cannot tell how long that audio is from its format, and at 1.3 MB it may play "
                                "for up to 12 min; I can take up to 5 min. Send it as a voice message, or a "
                                "shorter file.")
    assert len(stack.audio.transcriptions) == 1
