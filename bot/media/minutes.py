"""Minutes of audio transcribed per person and day (``limits.audio_minutes_per_day``), checked
before a voice note is transcribed and counted once it was.

A person is a limit key (``bot.limits.limit_keys``); owners are not counted (the stage gives no
payers for them). What a person used since 00:00 UTC is read once per person and day from the
store (``bot.media.ops``) and kept up to date here as audio is counted, for the people seen
recently (``MAX_PEOPLE``, as the other limits).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from bot.limits import MAX_PEOPLE, day_start
from bot.media import ops
from bot.store.schema_steps import StepStore


class AudioMinutes:
    def __init__(self, allowed: float, store: StepStore, *, clock: Callable[[], float] = time.time) -> None:
        self.allowed = allowed  # minutes per person and day
        self._store = store
        self._clock = clock
        self._people: OrderedDict[str, tuple[float, float]] = OrderedDict()  # person -> (day, seconds used)

    async def check(self, people: Sequence[str], seconds: float | None) -> str | None:
        """May ``seconds`` of audio (None: not known yet) be transcribed for ``people``? The
        refusal names what is left today, and is said each time: a voice note refused is one
        the person spoke, not a flood."""
        now = self._clock()
        for person in people:
            left = self.allowed * 60 - await self._used(person, now)
            if left <= 0 or (seconds is not None and seconds > left):
                rest = f"{left:.0f} s" if left < 120 else f"{left / 60:.0f} minutes"
                return (f"You've used today's {self.allowed:g} minutes of voice messages; type instead, or try again "
                        "after 00:00 UTC." if left < 1 else
                        f"That voice message is longer than the {rest} of audio you have left today; send a "
                        "shorter one, or type instead.")
        return None

    async def spend(self, people: Sequence[str], seconds: float) -> None:
        """Count ``seconds`` of audio transcribed for each of ``people`` (stored, and at once here)."""
        if seconds <= 0:
            return
        now = self._clock()
        for person in people:
            used = await self._used(person, now)
            self._people[person] = (day_start(now), used + seconds)
            await self._store.write(ops.record_audio(person, seconds, now))

    async def _used(self, person: str, now: float) -> float:
        """Seconds ``person`` used today (UTC): read from the store once a day."""
        day = day_start(now)
        known = self._people.get(person)
        if known is not None and known[0] == day:
            self._people.move_to_end(person)
            return known[1]
        used = await self._store.read(ops.audio_since(person, day))
        self._people[person] = (day, used)
        self._people.move_to_end(person)
        while len(self._people) > MAX_PEOPLE:
            self._people.popitem(last=False)
        return used
