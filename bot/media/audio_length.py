"""How long an audio file plays, read as a decoder would play it: WAV (PCM) and Ogg/Opus.

Platforms usually say (Telegram's ``duration``, Discord's ``duration_secs``), but a sender's
app may say anything, and so may a header field no decoder reads. So:

- WAV: the sample bytes present over sample rate x block align (what a decoder plays),
  never the header's ``byte_rate`` or data size; a format that is not PCM, or a block
  align that is not the channels' sample size, is not read (None).
- Ogg/Opus: the longer of the last page's granule position and the sum of the packets'
  own lengths (each packet's first byte, its TOC, says how many samples it holds), so a
  granule that lies does not shorten it.

``longest_seconds`` bounds a file that cannot be read this way by its size. Pure functions
over bytes; None when the format is not one of these or its header is not one to believe.
"""

from __future__ import annotations

import struct
from itertools import accumulate, compress

OPUS_RATE = 48_000  # Opus granule positions count 48 kHz samples, whatever the input rate
LOW_BYTES_PER_SECOND = 2_000  # 16 kbit/s: about the lowest bitrate speech is recorded at
MAX_RATE = 768_000  # samples a second; a WAV that claims more is not believed
_TAIL = 65_536 + 282  # the last Ogg page starts within this many bytes of the end
_PCM = frozenset({1, 3, 6, 7})  # PCM, IEEE float, A-law, mu-law: a block is one sample of each channel
_EXTENSIBLE = 0xFFFE  # the real format tag is the first two bytes of its sub-format GUID
_PACKET_MOST = 5760  # samples: an Opus packet holds at most 120 ms
# samples per frame (48 kHz) of each Opus configuration: SILK 10/20/40/60 ms, hybrid 10/20, CELT 2.5/5/10/20
_FRAME = (480, 960, 1920, 2880) * 3 + (480, 960) * 2 + (120, 240, 480, 960) * 4
# by TOC byte: the samples of a packet of code 0 (one frame), 1 or 2 (two); code 3 counts apart
_SAMPLES = tuple((1, 2, 2, 0)[toc & 3] * _FRAME[toc >> 3] for toc in range(256))
_IS_CODE3 = bytes(int(toc & 3 == 3) for toc in range(256))
_FRAME_COUNT = bytes(byte & 0x3F for byte in range(256))
_CODE3_SAMPLES = tuple(tuple(min(_FRAME[toc >> 3] * n, _PACKET_MOST) for n in range(64)) for toc in range(256))


def seconds_of(data: bytes) -> float | None:
    """The playing time of an Ogg/Opus or a PCM WAV file; None when it cannot be read."""
    if data[:4] == b"OggS":
        return _ogg_opus(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return _wav(data)
    return None


def longest_seconds(size: int) -> float:
    """The longest a file of ``size`` bytes plausibly plays (at a low bitrate), for one whose
    length cannot be read from it."""
    return size / LOW_BYTES_PER_SECOND


def _ogg_opus(data: bytes) -> float | None:
    head = data.find(b"OpusHead", 0, 512)
    if head < 0:
        return None  # Ogg, but not Opus (Vorbis counts at its own rate)
    pre_skip = struct.unpack_from("<H", data, head + 10)[0] if head + 12 <= len(data) else 0
    samples = _opus_samples(data)
    last = data.rfind(b"OggS", max(0, len(data) - _TAIL))
    if last >= 0 and last + 14 <= len(data):
        samples = max(samples, struct.unpack_from("<q", data, last + 6)[0])
    return max(0.0, (samples - pre_skip) / OPUS_RATE) if samples > 0 else None


def _opus_samples(data: bytes) -> int:
    """The samples of every audio packet of every page, a page that is not where the last one
    ended looked for as a decoder would. Made of C-level steps (``map``, ``compress``,
    ``translate``), not a Python step per packet, so a file of tiny packets walks quickly."""
    samples, fresh, headers, at = 0, True, 2, data.find(b"OggS")
    while 0 <= at and at + 27 <= len(data):
        lacing = data[at + 27:at + 27 + data[at + 26]]
        offsets = list(accumulate(lacing, initial=at + 27 + len(lacing)))  # each segment's start; the page's end
        if headers and data.startswith((b"OpusHead", b"OpusTags"), offsets[0]):
            headers -= 1  # the two header packets, each on pages of their own
        else:
            if 255 in lacing:  # packets that go on over segments (so at least 255 bytes each: few)
                starts = [offsets[i] for i, n in enumerate(lacing) if n and (lacing[i - 1] < 255 if i else fresh)]
            else:  # every segment is a whole packet; an empty one holds nothing
                starts = list(compress(offsets, lacing))
                if not fresh and lacing[:1] != b"\0":
                    del starts[:1]  # the end of a packet begun on the page before
            while starts and starts[-1] + 1 >= len(data):
                starts.pop()  # cut short: a packet needs its first two bytes to be counted
            samples += _packets(data, starts)
        if lacing:
            fresh = lacing[-1] < 255
        at = data.find(b"OggS", max(offsets[-1], at + 1))
    return samples


def _packets(data: bytes, starts: list[int]) -> int:
    """The samples of the packets starting at ``starts``: their TOC byte says the frame size and
    (codes 0 to 2) the frame count; code 3 has the count in the next byte."""
    tocs = bytes(map(data.__getitem__, starts))
    samples = sum(map(_SAMPLES.__getitem__, tocs))
    code3 = tocs.translate(_IS_CODE3)
    if 1 in code3:
        counts = bytes(map(data.__getitem__, map((1).__add__, compress(starts, code3))))
        rows = map(_CODE3_SAMPLES.__getitem__, compress(tocs, code3))
        samples += sum(map(tuple.__getitem__, rows, counts.translate(_FRAME_COUNT)))
    return samples


def _wav(data: bytes) -> float | None:
    at, fmt = 12, None
    while at + 8 <= len(data):
        kind, size = data[at:at + 4], struct.unpack_from("<I", data, at + 4)[0]
        if kind == b"fmt " and at + 24 <= len(data):
            tag, channels, rate, _, align, bits = struct.unpack_from("<HHIIHH", data, at + 8)
            if tag == _EXTENSIBLE and size >= 40 and at + 34 <= len(data):
                (tag,) = struct.unpack_from("<H", data, at + 32)
            fmt = tag, channels, rate, align, bits
        elif kind == b"data":
            if fmt is None:
                return None
            tag, channels, rate, align, bits = fmt
            if tag not in _PCM or not 0 < rate <= MAX_RATE or not align or align != channels * ((bits + 7) // 8):
                return None
            return (len(data) - at - 8) / (rate * align)  # what is there, whatever the chunk says
        at += 8 + size + (size & 1)
    return None
