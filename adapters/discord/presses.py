"""Questions with buttons on Discord: message components out, component interactions in.

A question is a message with action rows of buttons whose ``custom_id`` is the choice's id
(Discord allows 1 to 100 characters). The buttons are laid out with a discord.py ``View``
that is stopped before it is sent (``layout``), so discord.py keeps no state for it: a
press is handled by the channel's ``on_interaction`` for any button on a message the bot
wrote, the same in this process and after a restart, when no object of the one that sent
it is left. The channel defers every press at once (a deferred update: nothing visible
changes, Discord's 3 s are met) and keeps its interaction in ``Held`` for the core's one
answer, an ephemeral follow-up; an interaction's token lives 15 minutes.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import discord

from bot.channels import Choice

CUSTOM_ID = 100  # characters of a custom_id Discord accepts
LABEL = 80  # characters of a button's label
PER_ROW = 5  # buttons in one action row
ROWS = 5  # action rows in one message
TOKEN_LIFE = 14 * 60.0  # seconds an interaction's token is used for a follow-up (Discord: 15 min)
_HELD = 1024  # presses waiting for the core's answer, at most


def layout(choices: Sequence[Choice]) -> discord.ui.View:
    """The buttons of a question, five a row, as a view discord.py will not keep; ``ValueError``
    for what Discord would refuse (no choice, over 25, an empty or over-long or repeated id)."""
    ids = [c.id for c in choices]
    if not 1 <= len(ids) <= PER_ROW * ROWS or len(set(ids)) != len(ids):
        raise ValueError(f"a Discord question takes 1 to {PER_ROW * ROWS} choices with distinct ids, got {ids}")
    if any(not 1 <= len(i) <= CUSTOM_ID for i in ids):
        raise ValueError(f"a Discord custom_id is 1 to {CUSTOM_ID} characters, got {ids}")
    view = discord.ui.View(timeout=None)
    for index, choice in enumerate(choices):
        label = choice.label if len(choice.label) <= LABEL else choice.label[:LABEL - 1] + "…"
        view.add_item(discord.ui.Button(label=label, custom_id=choice.id, row=index // PER_ROW))
    view.stop()  # finished before it is sent: discord.py stores no view for the message
    return view


class Held:
    """Interactions of presses the core has not answered yet, by the press's message id."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held: OrderedDict[str, tuple[float, discord.Interaction]] = OrderedDict()

    def keep(self, press_id: str, interaction: discord.Interaction) -> None:
        self._held[press_id] = (self._clock(), interaction)
        while len(self._held) > _HELD:
            self._held.popitem(last=False)

    def take(self, press_id: str) -> discord.Interaction | None:
        """The press's interaction, once; None when unknown here or too old to follow up."""
        held = self._held.pop(press_id, None)
        if held is None or self._clock() - held[0] > TOKEN_LIFE:
            return None
        return held[1]
