"""How long an audio file plays, read from its container: Ogg/Opus (voice notes) and WAV.

Platforms usually say (Telegram's ``duration``, Discord's ``duration_secs``); this is for
when they do not. Pure functions over bytes; None when the format is not one of these or
the file is cut short.
"""

from __future__ import annotations

import struct

OPUS_RATE = 48_000  # Opus granule positions count 48 kHz samples, whatever the input rate
_TAIL = 65_536 + 282  # the last Ogg page starts within this many bytes of the end
_ROUGH_BYTES_PER_SECOND = 16_000  # 128 kbit/s: a compressed music or memo file


def seconds_of(data: bytes) -> float | None:
    """The playing time of an Ogg/Opus or WAV file; None when it cannot be read."""
    if data[:4] == b"OggS":
        return _ogg_opus(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return _wav(data)
    return None


def rough_seconds(size: int) -> float:
    """A guess from the size alone, for counting minutes when nothing better is known."""
    return size / _ROUGH_BYTES_PER_SECOND


def _ogg_opus(data: bytes) -> float | None:
    if data.find(b"OpusHead", 0, 512) < 0:
        return None  # Ogg, but not Opus (Vorbis counts at its own rate)
    last = data.rfind(b"OggS", max(0, len(data) - _TAIL))
    if last < 0 or last + 14 > len(data):
        return None
    (granule,) = struct.unpack_from("<q", data, last + 6)
    pre_skip = 0
    head = data.find(b"OpusHead")
    if head + 12 <= len(data):
        (pre_skip,) = struct.unpack_from("<H", data, head + 10)
    return max(0.0, (granule - pre_skip) / OPUS_RATE) if granule >= 0 else None


def _wav(data: bytes) -> float | None:
    at, byte_rate = 12, 0
    while at + 8 <= len(data):
        kind, size = data[at:at + 4], struct.unpack_from("<I", data, at + 4)[0]
        if kind == b"fmt " and at + 20 <= len(data):
            (byte_rate,) = struct.unpack_from("<I", data, at + 16)
        elif kind == b"data":
            return size / byte_rate if byte_rate else None
        at += 8 + size + (size & 1)
    return None
