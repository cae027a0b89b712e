"""Audio for tests, and a fake OpenAI audio server on 127.0.0.1 (``/v1/audio/transcriptions``
and ``/v1/audio/speech``), so the real ``openai`` SDK transcribes and speaks in tests.

    async with FakeAudio() as audio:
        ... media.transcription.base_url: audio.base_url ...
        audio.script(Heard.error(500))        # the next transcription fails
        voice = ogg_opus("what time is it?", seconds=3.0)  # what the fake hears in it

``ogg_opus`` makes a small Ogg stream shaped like a voice note: an ``OpusHead`` page, then
one page whose packet carries ``SAY:<text>`` and whose granule position gives ``seconds``.
The fake transcribes a file to the text after ``SAY:`` (an empty transcript when there is
none). Speech comes back as Ogg bytes carrying ``SPOKEN:<text>``.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

from tests.fakes.serving import serve

OPUS_RATE = 48_000


def _page(granule: int, packet: bytes, sequence: int, header_type: int = 0) -> bytes:
    segments = [255] * (len(packet) // 255) + [len(packet) % 255]
    return (b"OggS" + struct.pack("<BBqIIIB", 0, header_type, granule, 0x1234, sequence, 0, len(segments))
            + bytes(segments) + packet)


def ogg_opus(text: str, seconds: float = 2.0) -> bytes:
    """A voice note (Ogg/Opus in shape) saying ``text``, ``seconds`` long."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 0, OPUS_RATE, 0, 0)
    return _page(0, head, 0, header_type=2) + _page(int(seconds * OPUS_RATE), b"SAY:" + text.encode(), 1,
                                                    header_type=4)


def spoken(data: bytes) -> str:
    """What the fake hears in an audio file."""
    _, found, said = data.partition(b"SAY:")
    return said.split(b"\0", 1)[0].decode("utf-8", "replace") if found else ""


@dataclass(frozen=True, slots=True)
class Heard:
    """One scripted answer of the transcription endpoint."""

    kind: Literal["text", "error", "hang"] = "text"
    text: str | None = None  # None: what the file says (``spoken``)
    status: int = 200
    seconds: float | None = None  # usage reported as {"type": "duration", "seconds": ...}

    @classmethod
    def error(cls, status: int) -> Heard:
        return cls("error", status=status)

    @classmethod
    def hang(cls) -> Heard:
        return cls("hang")


@dataclass(frozen=True, slots=True)
class AudioCall:
    path: str  # /v1/audio/transcriptions or /v1/audio/speech
    model: str
    filename: str = ""
    data: bytes = field(default=b"", repr=False)
    input: str = ""  # what speech was asked to say
    voice: str = ""
    response_format: str = ""
    time: float = 0.0


class FakeAudio:
    """``async with FakeAudio() as audio``; ``port=0`` picks a free port."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.calls: list[AudioCall] = []
        self._script: deque[Heard] = deque()
        self._changed = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def transcriptions(self) -> list[AudioCall]:
        return [c for c in self.calls if c.path.endswith("/transcriptions")]

    @property
    def speeches(self) -> list[AudioCall]:
        return [c for c in self.calls if c.path.endswith("/speech")]

    def script(self, *replies: Heard) -> None:
        """Queue transcription answers; each request takes the next (what the file says when none is left)."""
        self._script.extend(replies)

    async def wait_for_calls(self, count: int, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.calls) >= count)

    async def __aenter__(self) -> FakeAudio:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)
        self._runner, self.port = await serve(app, self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _record(self, call: AudioCall) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return _error(400, "you must provide a file")
        data = upload.file.read()
        await self._record(AudioCall(request.path, str(form.get("model") or ""), upload.filename or "", data,
                                     response_format=str(form.get("response_format") or ""), time=time.monotonic()))
        reply = self._script.popleft() if self._script else Heard()
        if reply.kind == "hang":
            await self._stopping.wait()
            return _error(503, "stopping")
        if reply.kind == "error":
            return _error(reply.status, "The server had an error while processing your request.")
        body: dict[str, object] = {"text": spoken(data) if reply.text is None else reply.text}
        if reply.seconds is not None:
            body["usage"] = {"type": "duration", "seconds": reply.seconds}
        return web.json_response(body)

    async def _speak(self, request: web.Request) -> web.Response:
        body = await request.json()
        call = AudioCall(request.path, str(body.get("model") or ""), input=str(body.get("input") or ""),
                         voice=str(body.get("voice") or ""), response_format=str(body.get("response_format") or ""),
                         time=time.monotonic())
        await self._record(call)
        audio = ogg_opus("", seconds=1.0) + b"SPOKEN:" + call.input.encode()
        return web.Response(body=audio, content_type="audio/ogg")


def _error(status: int, message: str) -> web.Response:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": None}},
                             status=status)


__all__ = ["AudioCall", "FakeAudio", "Heard", "ogg_opus", "spoken"]
