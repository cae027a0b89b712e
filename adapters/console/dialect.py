"""The terminal's dialect: plain text (the port's ``PLAIN``: code blocks as their lines,
tables aligned, links followed by their address, quotes behind "│ "), and its limits: a
terminal has no message length, so an answer is one message, printed as it streams."""

from __future__ import annotations

from bot.channels import PLAIN, Limits

__all__ = ["CONSOLE", "LIMITS"]

CONSOLE = PLAIN
LIMITS = Limits(chunk=1_000_000, max_chunks=1_000, edit_every=0.0, status_every=3600.0)
