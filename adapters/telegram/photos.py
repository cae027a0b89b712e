"""Whether a picture can go as a Telegram photo (sendPhoto), from its first bytes.

The Bot API takes a photo of at most 10 MB whose width and height add up to at most 10,000
and whose sides differ by at most 20 times; anything else (or a picture whose size cannot be
read: not PNG, JPEG, GIF or WebP) goes as a document, which keeps every byte. Telegram itself
may still refuse a photo it cannot process: the channel then sends the document too.
"""

from __future__ import annotations

import struct

MAX_PHOTO = 10 * 1024 * 1024  # bytes
MAX_SIDES = 10_000  # width + height
MAX_RATIO = 20
REFUSALS = ("photo_", "image_process_failed", "wrong type of the web page content", "failed to get http url content")


def photo_problem(data: bytes) -> str | None:
    """None when ``data`` can go as a photo; else why it goes as a document."""
    if len(data) > MAX_PHOTO:
        return f"{len(data)} bytes, over the {MAX_PHOTO} of a photo"
    size = dimensions(data)
    if size is None:
        return "not a picture whose size can be read"
    width, height = size
    if width <= 0 or height <= 0 or width + height > MAX_SIDES:
        return f"{width}x{height}, over {MAX_SIDES} in width and height together"
    if max(width, height) > MAX_RATIO * min(width, height):
        return f"{width}x{height}, longer than {MAX_RATIO} times its width"
    return None


def refused_as_photo(message: str) -> bool:
    """A Bad Request of sendPhoto that a document would not meet (the picture, not the chat)."""
    lowered = message.lower()
    return any(word in lowered for word in REFUSALS)


def dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF, WebP or JPEG picture; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg(data)
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    kind = data[12:16]
    if kind == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> tuple[int, int] | None:
    """The frame header's size: markers walked from the start, segment by segment."""
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2:at + 4])
        if marker in _SOF:
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        if marker == 0xDA or length < 2:  # the scan began without a frame header
            return None
        at += 2 + length
    return None
