"""An MCP tool's result as the model reads it: text, images, links, files.

``render`` is pure: a ``CallToolResult`` becomes ``Rendered``, its pieces in order, text and
``Blob``s (images, audio, binary resources) with what the text says of each:

- text content as it is; an embedded text resource under a line naming its URI;
- an image is shown to the model (both providers take PNG, JPEG, GIF and WebP inline, up to
  ``MAX_IMAGE_BYTES``) and saved in the workspace; audio and binary resources are saved;
- a resource link is one line: its name, URI, type and description;
- structured content as JSON when the server sent no text (a server that sends both is meant
  to put the same JSON in its text);
- ``isError`` is kept: the caller turns the result into a failed tool result;
- the parts together are capped at ``MAX_RESULT_BYTES`` (text characters and decoded blob
  bytes) before anything is joined or saved: a text that crosses it is cut, a blob past it
  left out, and a last line says so (``Rendered.cut``: how much was left out, for the log).

``settle`` does the I/O: it writes the blobs, and a text longer than ``max_chars`` too, into
``mcp-output/`` in the run's workspace; the model gets the head of the text and the path to
read the rest from (``read_file``). The folder is walked like every host-side access to a
workspace (``bot.workspace.create_inside``: ``O_NOFOLLOW``, by descriptor), so a link a command
planted or swaps in there never leads a write outside.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import mcp_types as types

from bot.llm import ImagePart
from bot.mcp.naming import sanitise
from bot.tools.base import NOTHING, ToolOutput
from bot.workspace import create_inside

OUTPUT_DIR = "mcp-output"
HEAD_CHARS = 4_000  # of an oversized text, what the model reads at once
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # an image above this is saved only (the providers' inline limit)
MAX_BLOB_BYTES = 50 * 1024 * 1024  # a binary part above this is not saved either
MAX_RESULT_BYTES = 64 * 1024 * 1024  # all of a result's parts together; the rest is cut (see the module doc)
SHOWN_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_SUFFIX = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
           "audio/wav": ".wav", "audio/mpeg": ".mp3", "audio/ogg": ".ogg", "application/pdf": ".pdf",
           "application/json": ".json", "text/plain": ".txt"}


@dataclass(frozen=True, slots=True)
class Blob:
    kind: str  # image | audio | resource
    mime: str
    data: str  # base64, as the server sent it
    about: str  # what the text says of it ("image/png from the tool")


@dataclass(frozen=True, slots=True)
class Rendered:
    pieces: tuple[str | Blob, ...]
    is_error: bool = False
    cut: int = 0  # characters and bytes left out past MAX_RESULT_BYTES


def render(result: types.CallToolResult) -> Rendered:
    pieces: list[str | Blob] = []
    has_text = False
    for block in result.content:
        if isinstance(block, types.TextContent):
            pieces.append(block.text)
            has_text = True
        elif isinstance(block, types.ImageContent):
            pieces.append(Blob("image", block.mime_type, block.data, f"image ({block.mime_type})"))
        elif isinstance(block, types.AudioContent):
            pieces.append(Blob("audio", block.mime_type, block.data, f"audio ({block.mime_type})"))
        elif isinstance(block, types.ResourceLink):
            pieces.append(link_line(block))
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                pieces.append(f"[resource {resource.uri}]\n{resource.text}")
                has_text = True
            else:
                mime = resource.mime_type or "application/octet-stream"
                pieces.append(Blob("resource", mime, resource.blob, f"resource {resource.uri} ({mime})"))
    if result.structured_content is not None and not has_text:
        pieces.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    return _capped(pieces, bool(result.is_error))


def _capped(pieces: list[str | Blob], is_error: bool) -> Rendered:
    """The pieces up to ``MAX_RESULT_BYTES`` in all (a blob counted by its decoded size), and a
    line saying what was left out past it."""
    room = limit = MAX_RESULT_BYTES
    kept: list[str | Blob] = []
    cut = 0
    for piece in pieces:
        size = len(piece) if isinstance(piece, str) else len(piece.data) * 3 // 4
        if size <= room:
            kept.append(piece)
            room -= size
        elif isinstance(piece, str) and room > 0:
            kept.append(piece[:room])
            cut += size - room
            room = 0
        else:
            cut += size
            if isinstance(piece, Blob):
                kept.append(f"[{piece.about}, about {size:,} bytes: left out, past the result's limit]")
    if cut:
        kept.append(f"[the result was cut at {limit:,} characters: {cut:,} more were left out]")
    return Rendered(tuple(kept), is_error, cut)


def link_line(link: types.ResourceLink) -> str:
    details = ", ".join(part for part in (link.mime_type, f"{link.size:,} bytes" if link.size else None) if part)
    line = f"[resource link: {link.name} <{link.uri}>{f' ({details})' if details else ''}"
    return f"{line}: {link.description}]" if link.description else f"{line}]"


def head_and_path(text: str, saved: str, head: int = HEAD_CHARS) -> str:
    """What the model reads of an oversized text; ``saved`` says where the whole is."""
    return (f"{text[:head]}\n[… {len(text) - head:,} more characters: the whole output ({len(text):,} characters) "
            f"is {saved}; read it with read_file]")


async def settle(rendered: Rendered, workspace: Path, stem: str, max_chars: int) -> ToolOutput:
    """The result as a ``ToolOutput``: blobs saved under ``mcp-output/``, images shown, an
    oversized text saved with its head kept. ``stem`` names the files (server and tool).
    Files are written in a worker thread; a plain text that fits needs none."""
    texts = [p for p in rendered.pieces if isinstance(p, str)]
    if len(texts) == len(rendered.pieces) and sum(len(t) + 1 for t in texts) <= max_chars + 1:
        return ToolOutput("\n".join(texts) or NOTHING)
    return await asyncio.to_thread(_settle, rendered, workspace, stem, max_chars)


def _settle(rendered: Rendered, workspace: Path, stem: str, max_chars: int) -> ToolOutput:
    texts: list[str] = []
    images: list[ImagePart] = []
    base = f"{time.strftime('%Y%m%d-%H%M%S')}-{sanitise(stem)[:60]}-{os.urandom(2).hex()}"
    for n, piece in enumerate(rendered.pieces, 1):
        if isinstance(piece, str):
            texts.append(piece)
            continue
        try:
            data = base64.b64decode(piece.data, validate=True)
        except (binascii.Error, ValueError):
            texts.append(f"[{piece.about}: not valid base64, left out]")
            continue
        if len(data) > MAX_BLOB_BYTES:
            texts.append(f"[{piece.about}, {len(data):,} bytes: too large to keep, left out]")
            continue
        saved = _save(workspace, f"{base}-{n}{_SUFFIX.get(piece.mime, '.bin')}", data)
        shown = piece.kind == "image" and piece.mime in SHOWN_IMAGES and len(data) <= MAX_IMAGE_BYTES
        if shown:
            images.append(ImagePart(piece.mime, piece.data))
        texts.append(f"[{piece.about}, {len(data):,} bytes, {saved}{'; shown to you below' if shown else ''}]")
    text = "\n".join(texts) or NOTHING
    if len(text) > max_chars:
        saved = _save(workspace, f"{base}.txt", text.encode("utf-8", "replace"))
        text = head_and_path(text, saved)
    return ToolOutput(text, tuple(images))


def _save(workspace: Path, name: str, data: bytes) -> str:
    """Write ``data`` to ``mcp-output/name`` in the workspace: "saved in the workspace as
    <path>", or why it could not be (a link leading out of the workspace is never followed)."""
    try:
        fd, relative = create_inside(workspace, f"{OUTPUT_DIR}/{name}", 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    except OSError as exc:
        return f"not saved ({exc.strerror or exc})"
    return f"saved in the workspace as {relative}"
