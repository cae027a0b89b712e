"""Chat commands: parsed here, handled by the gateway at once, even during a run."""

from __future__ import annotations

from dataclasses import dataclass

HELP = """\
/stop – stop the current answer
/new – start a fresh conversation (the old one is kept)
/help – this list"""


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str = ""


def parse_command(text: str, bot_username: str | None = None) -> Command | None:
    """``/name[@bot] args`` -> Command; None for plain text or a command for another bot."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, _, args = text[1:].partition(" ")
    name, _, target = head.partition("@")
    if not name.isidentifier():
        return None
    if target and (bot_username is None or target.lower() != bot_username.lower()):
        return None
    return Command(name.lower(), args.strip())
