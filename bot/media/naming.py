"""What a transcript means to the audio stage (``hearing``): whether it names the bot, and
whether it is a command.

Pure functions. A group voice note without a caption addresses the bot when its transcript
says one of the bot's names (``Named``: its username, its display name) as a word or a few
run together ("chat gate" is "chatgate"; a trailing "bot" of a username may be left out).
A spoken command is "slash" (or "/") and a command name, with its arguments ("slash voice
on" is ``/voice on``), or one of a few commands said alone ("Stop.").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

_WORD = re.compile(r"[^\W_]+")
BARE_COMMANDS = frozenset({"stop", "status", "help"})  # said alone, these are commands
_MIN_NAME = 3  # shorter names ("ai") are too easy to say by chance


def _variants(name: str) -> set[str]:
    parts = [w.lower() for w in _WORD.findall(name)]
    found = {"".join(parts)}
    if len(parts) > 1 and parts[-1] == "bot":
        found.add("".join(parts[:-1]))
    elif parts and parts[-1].endswith("bot") and len(parts[-1]) > 3:
        found.add("".join(parts[:-1]) + parts[-1][:-3])  # chatgatebot -> chatgate
    return {v for v in found if len(v) >= _MIN_NAME}


def addresses(transcript: str, names: Iterable[str]) -> bool:
    """Does the transcript say one of ``names``?"""
    wanted = set().union(*(_variants(n) for n in names))
    if not wanted:
        return False
    words = [w.lower() for w in _WORD.findall(transcript)]
    longest = max(len(v) for v in wanted)
    for start in range(len(words)):
        joined = ""
        for word in words[start:start + 4]:
            joined += word
            if joined in wanted:
                return True
            if len(joined) >= longest:
                break
    return False


def spoken_command(transcript: str, commands: Collection[str]) -> str | None:
    """The command a transcript says, as typed (``/voice on``); None for anything else."""
    words = [w.lower() for w in re.findall(r"/?[^\W_]+", transcript)]
    if not words:
        return None
    explicit = words[0] in ("slash", "/") or words[0].startswith("/")
    if words[0] in ("slash", "/"):
        words = words[1:]
    if not words:
        return None
    name = words[0].lstrip("/")
    if name not in commands:
        return None
    if not explicit and (len(words) > 1 or name not in BARE_COMMANDS):
        return None
    return " ".join([f"/{name}", *words[1:]])
