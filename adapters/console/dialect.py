"""The terminal's dialect: plain text (the port's ``PLAIN``: code blocks as their lines,
tables aligned, links followed by their address, quotes behind "│ "), and its message
shape: a terminal has no message length, so an answer is one message, printed as it streams."""

from __future__ import annotations

from bot.channels import PLAIN, MessageShape

__all__ = ["CONSOLE", "SHAPE"]

CONSOLE = PLAIN
SHAPE = MessageShape(chunk=1_000_000, max_chunks=1_000, edit_every=0.0, status_every=3600.0)
