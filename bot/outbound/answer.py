"""The end of the outbound pipeline: an answer's Markdown -> the channel's dialect -> chunks
of its message shape (a file when there would be too many): the chunks of an ``Answer``.

Pure: the chunks are rendered once, here, and stored as they will be sent, so a resumed
delivery sends exactly what the first attempt would have.
"""

from __future__ import annotations

from bot.channels import Channel
from bot.messages import Chunk
from bot.outbound.markdown import render
from bot.outbound.split import render_chunks, too_many

FILE_NAME = "answer.md"
FILE_NOTE = "_The full answer is long, so it is attached as a file._"
SUMMARY_CHARS = 300
EMPTY = "…"


def chunks_for(markdown: str, channel: Channel) -> tuple[Chunk, ...]:
    """The messages that carry ``markdown`` on ``channel``."""
    texts = render_chunks(markdown, channel.dialect, channel.shape)
    if not texts:
        return (Chunk(render(EMPTY, channel.dialect)),)
    if not too_many(texts, channel.shape):
        return tuple(Chunk(text) for text in texts)
    summary = markdown.strip().split("\n\n", 1)[0][:SUMMARY_CHARS]
    note = render_chunks(f"{summary}\n\n{FILE_NOTE}", channel.dialect, channel.shape)[:1]
    return (*(Chunk(text) for text in note), Chunk("", FILE_NAME, markdown.encode()))

