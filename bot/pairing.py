"""Pairing codes: what they look like and what the sender is told.

A code is 8 characters from an alphabet without the look-alikes 0/O and 1/I, drawn with
``secrets``: 32^8 (about 10^12) codes, valid for an hour, at most a few pending per
origin, so guessing one that is pending is hopeless. The owner approves it with
``chatgate pairing approve CODE``; ``normalize_code`` makes that forgiving of case,
spaces and dashes. Stores (``bot.store``) persist codes; ``bot.access`` hands them out.

A pending code is never dropped before it expires: when ``MAX_PENDING`` codes of one origin
wait, the next stranger from there is told to try later. The origin (``origin_of``) is the
platform and the bot account written to: that is all a DM says about where its sender comes
from (a Telegram private chat or a Discord DM has no group or guild; a Slack bot user
belongs to the one workspace it is installed in), so one platform's strangers never close
pairing on another.
"""

from __future__ import annotations

import math
import secrets

from bot.messages import InboundMessage

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, no 1/I
CODE_LENGTH = 8
CODE_TTL = 3600.0  # seconds
MAX_PENDING = 3  # unexpired, unapproved codes per origin


def new_code() -> str:
    """A fresh random code, e.g. ``ABCD2345``."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(text: str) -> str:
    """What the owner typed -> the stored form: upper case, without spaces or dashes."""
    return "".join(text.split()).replace("-", "").upper()


def origin_of(msg: InboundMessage) -> str:
    """Where a pairing request comes from, for the cap on pending codes: ``platform:account``."""
    return f"{msg.platform}:{msg.account}"


def pairing_reply(code: str, seconds_left: float, *, replaces: bool = False) -> str:
    """The message that gives a sender their code; ``replaces``: they were given another before."""
    again = "Your earlier code is no longer valid. " if replaces else ""
    return (f"{again}To talk to me, ask the owner to run: chatgate pairing approve {code} "
            f"(valid for {_duration(seconds_left)}).")  # fmt: skip


def _duration(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60 - 1e-9))
    if minutes >= 60:
        hours = round(minutes / 60)
        return "1 hour" if hours == 1 else f"{hours} hours"
    return "1 more minute" if minutes == 1 else f"{minutes} more minutes"
