"""Limits per person: a message rate, daily token and cost budgets, checked before a run (the
minutes of audio transcribed per day, ``audio_minutes_per_day``, are the media capability's to
count: ``bot.media.minutes``).

A person is ``platform:user_id``. A message sent as a channel (``Sender.as_channel``) also
counts against one bucket that all channels share in its chat (``limit_keys``): a Telegram user
can post in a group as any channel they own, and each channel would otherwise be a new person
with a fresh rate. The rate is a token bucket per person (``messages_per_minute``
tokens, refilled evenly over a minute), kept for the people seen recently. The budgets count
the tokens (in + out) and cost charged to the person since 00:00 UTC, read once per person
and day from the store and kept up to date as charges arrive, so a check costs a dict lookup.
Owners are exempt (the intake does not ask for them).

Charging: every model call is charged as its usage arrives, through the ``Bill`` of the run
or compaction that made it (``TraceBuilder.llm`` is the one place every call passes). The
bill splits the call evenly among the people the run serves (the senders of a collected
batch), tells the limits at once (``PersonLimits.charge``: a run ended by ``/stop`` or an
interrupt has already counted what it spent) and is stored with the turn, whatever way
the run ends. A sub-agent's calls are on its own bill, never on its parent's too.

``check`` returns what to tell the person, or None to run; it says it once per window (a
minute for the rate, the day for a budget): a message over a limit after that is stored and
answered by silence, so a flood gets one sentence, not a sentence per message.

The whole bot has daily budgets too (``bot_daily_tokens``, ``bot_daily_cost_usd``: everyone's
charges together, owners' included): once spent, ``check_all`` refuses new runs of anyone but
the owners with one sentence (``BOT_SPENT``, said once a day to each person), until 00:00 UTC.

With several instances (``shared``), the rate is one bucket per person in the database that
every instance takes from, and the budgets are read from the store at every check (another
instance's charges count at once). Being told is remembered in the database when the store
keeps notes (``NoteStore``: a flood spread over instances, or across a restart, still gets
one sentence per window), else in this process.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.messages import InboundMessage
from bot.providers.base import Usage
from bot.store.base import Charge, NoteStore

Meter = Callable[[Sequence[Charge]], None]  # told each model call's charges as they arrive

BOT_SPENT = "I've reached the whole bot's spending limit for today; I can take new requests again after 00:00 UTC."
MAX_PEOPLE = 10_000  # people whose bucket and day are kept; the longest unseen are dropped


@dataclass(frozen=True, slots=True)
class LimitSettings:
    messages_per_minute: int | None = 20
    daily_tokens: int | None = None
    daily_cost_usd: float | None = None
    audio_minutes_per_day: float | None = None  # of voice notes and audio transcribed (counted by bot.media)
    bot_daily_tokens: int | None = None  # the whole bot's daily budgets (everyone's charges together)
    bot_daily_cost_usd: float | None = None

    @property
    def bot_budget(self) -> bool:
        return self.bot_daily_tokens is not None or self.bot_daily_cost_usd is not None


@dataclass(frozen=True, slots=True)
class Refusal:
    text: str  # the one sentence, or "" when the person was already told in this window
    reason: str  # "rate" | "tokens" | "cost" | "bot-tokens" | "bot-cost" (the whole bot's budget)


class UsageStore(Protocol):
    async def usage_since(self, person: str, since: float) -> tuple[int, float]: ...

    async def bot_usage_since(self, since: float) -> tuple[int, float]:
        """(tokens, cost) charged to everyone since ``since``."""
        ...


class SharedRates(Protocol):
    async def take_rate(self, person: str, capacity: float, per_second: float) -> float:
        """Take one message of ``person``'s bucket shared by every instance: 0.0 when taken, else
        the part of a token missing."""
        ...


class Bill:
    """The charges of one run or compaction: each model call's tokens (in + out) and cost
    split evenly among ``payers`` (the remainder of the tokens to the first), told to
    ``meter`` at once and totalled per person for the turn."""

    def __init__(self, payers: Sequence[str], meter: Meter | None = None) -> None:
        self.payers = tuple(dict.fromkeys(payers))  # each once, in order
        self._meter = meter
        self._totals: dict[str, tuple[int, float]] = {}

    def add(self, usage: Usage, cost: float) -> None:
        charges = split(self.payers, usage.input_tokens + usage.output_tokens, cost)
        if not charges:
            return
        for c in charges:
            tokens, spent = self._totals.get(c.person, (0, 0.0))
            self._totals[c.person] = (tokens + c.tokens, spent + c.cost)
        if self._meter is not None:
            self._meter(charges)

    def charges(self) -> tuple[Charge, ...]:
        return tuple(Charge(person, tokens, cost) for person, (tokens, cost) in self._totals.items())


def split(payers: Sequence[str], tokens: int, cost: float) -> tuple[Charge, ...]:
    """``tokens`` and ``cost`` shared evenly by ``payers``; nothing when there is no one or nothing to share."""
    if not payers or (tokens <= 0 and cost <= 0):
        return ()
    share, rest = divmod(max(tokens, 0), len(payers))
    return tuple(Charge(person, share + (1 if i < rest else 0), cost / len(payers)) for i, person in enumerate(payers))


@dataclass(slots=True)
class _Person:
    tokens: float  # the bucket
    refilled: float  # when it was last refilled
    day: float = -1.0  # start of the UTC day ``used`` counts
    used_tokens: int = 0
    used_cost: float = 0.0
    told: dict[str, float] | None = None  # reason -> told until


class PersonLimits:
    def __init__(self, settings: LimitSettings, store: UsageStore, *, clock: Callable[[], float] = time.time,
                 shared: SharedRates | None = None) -> None:
        self.settings = settings
        self._store = store
        self._clock = clock
        self._shared = shared
        self._notes = store if isinstance(store, NoteStore) else None  # being told, in the database
        self._bot = _Person(0.0, 0.0)  # the whole bot's day (its budgets), not a person
        self._people: OrderedDict[str, _Person] = OrderedDict()
        self._watchers: list[Meter] = []

    @property
    def active(self) -> bool:
        s = self.settings
        return s.bot_budget or any(v is not None for v in (s.messages_per_minute, s.daily_tokens, s.daily_cost_usd,
                                                           s.audio_minutes_per_day))

    async def check(self, person: str) -> Refusal | None:
        """Take one message of ``person``: None to run it, else a refusal."""
        now = self._clock()
        p = self._person(person, now)
        s = self.settings
        if s.daily_tokens is not None or s.daily_cost_usd is not None:
            await self._today(person, p, now)
            midnight = p.day + 86400
            if s.daily_tokens is not None and p.used_tokens >= s.daily_tokens:
                return await self._refuse(person, p, "tokens", midnight, now,
                                    f"You've used today's allowance of {s.daily_tokens:,} tokens; "
                                    "it renews at 00:00 UTC.")
            if s.daily_cost_usd is not None and p.used_cost >= s.daily_cost_usd:
                return await self._refuse(person, p, "cost", midnight, now,
                                    f"You've used today's budget of ${s.daily_cost_usd:.2f}; it renews at 00:00 UTC.")
        if s.messages_per_minute is not None:
            rate = s.messages_per_minute / 60.0
            if self._shared is not None:
                missing = await self._shared.take_rate(person, float(s.messages_per_minute), rate)
            else:
                p.tokens = min(float(s.messages_per_minute), p.tokens + (now - p.refilled) * rate)
                p.refilled = now
                missing = max(0.0, 1.0 - p.tokens)
                if not missing:
                    p.tokens -= 1.0
            if missing:
                wait = missing / rate
                return await self._refuse(person, p, "rate", now + 60.0, now,
                                    f"You're sending messages faster than I can take them (at most "
                                    f"{s.messages_per_minute} a minute); try again in {max(1, round(wait))} s.")
        return None

    async def check_all(self, people: Sequence[str]) -> Refusal | None:
        """The whole bot's budget first (told to the sender, ``people[-1]``, once a day), then
        ``check`` each of ``people`` in order (``limit_keys``); the first refusal ends it, and the
        people after it are not charged."""
        if self.settings.bot_budget and people and (refusal := await self.check_bot(people[-1])) is not None:
            return refusal
        for person in people:
            refusal = await self.check(person)
            if refusal is not None:
                return refusal
        return None

    async def check_bot(self, person: str) -> Refusal | None:
        """May a new run start, as far as the whole bot's daily budget goes? A refusal's sentence
        is said to ``person`` once a day."""
        s, now = self.settings, self._clock()
        tokens, cost = await self.bot_today()
        midnight = self._bot.day + 86400
        p = self._person(person, now)
        if s.bot_daily_tokens is not None and tokens >= s.bot_daily_tokens:
            return await self._refuse(person, p, "bot-tokens", midnight, now, BOT_SPENT)
        if s.bot_daily_cost_usd is not None and cost >= s.bot_daily_cost_usd:
            return await self._refuse(person, p, "bot-cost", midnight, now, BOT_SPENT)
        return None

    async def bot_today(self) -> tuple[int, float]:
        """(tokens, cost) the whole bot used today (UTC)."""
        b, day = self._bot, day_start(self._clock())
        if b.day != day or self._shared is not None:
            b.used_tokens, b.used_cost = await self._store.bot_usage_since(day)
            b.day = day
        return b.used_tokens, b.used_cost

    def charge(self, charges: Sequence[Charge]) -> None:
        """The ``Meter``: model calls just charged to these people (the budgets count them at
        once). A person whose day is not loaded yet is skipped: the store has it by then. Then
        each watcher is told (``watch``)."""
        b = self._bot
        for c in charges:
            p = self._people.get(c.person)
            if p is not None and p.day >= 0:
                p.used_tokens += c.tokens
                p.used_cost += c.cost
            if b.day >= 0:
                b.used_tokens += c.tokens
                b.used_cost += c.cost
        for watcher in self._watchers:
            watcher(charges)

    def watch(self, watcher: Meter) -> None:
        """Tell ``watcher`` every charge as it arrives (a capability's: the budget alerts)."""
        self._watchers.append(watcher)

    async def today(self, person: str) -> tuple[int, float]:
        """(tokens, cost) ``person`` used today (UTC)."""
        now = self._clock()
        p = self._person(person, now)
        await self._today(person, p, now)
        return p.used_tokens, p.used_cost

    def _person(self, person: str, now: float) -> _Person:
        p = self._people.get(person)
        if p is None:
            p = self._people[person] = _Person(float(self.settings.messages_per_minute or 0), now)
            while len(self._people) > MAX_PEOPLE:
                self._people.popitem(last=False)
        else:
            self._people.move_to_end(person)
        return p

    async def _today(self, person: str, p: _Person, now: float) -> None:
        day = day_start(now)
        if p.day != day or self._shared is not None:  # several instances: each one's charges count at once
            p.used_tokens, p.used_cost = await self._store.usage_since(person, day)
            p.day = day

    async def _refuse(self, person: str, p: _Person, reason: str, until: float, now: float, text: str) -> Refusal:
        """The refusal, with its sentence the first time in the window (on any instance)."""
        told = p.told if p.told is not None else {}
        p.told = told
        if told.get(reason, 0.0) > now:
            return Refusal("", reason)
        if self._notes is not None and not await self._notes.first_note(person, f"limit:{reason}", until, now):
            return Refusal("", reason)  # another instance (or this one before a restart) told them
        told[reason] = until
        return Refusal(text, reason)


def limit_keys(msg: InboundMessage, person: str | None = None, channel: object = None) -> tuple[str, ...]:
    """The people a message counts as: its sender (``person:<name>`` when ``identity_links``
    names one, so a linked person has one budget on every platform; else ``platform:user_id``;
    on a ``channel`` OfPeople, what it says), and for a message sent as a channel, first the bucket
    all channels share in that chat (``platform:as-channel:chat``): that one is the most used, so a
    refusal there charges no channel's own."""
    from bot.channels import OfPeople  # here: bot.channels imports the command table, which imports this
    own = channel.limit_key(msg.sender.id) if isinstance(channel, OfPeople) else \
        f"person:{person}" if person else f"{msg.platform}:{msg.sender.id}"
    if msg.sender.as_channel:
        return (f"{msg.platform}:as-channel:{msg.chat_id}", own)
    return (own,)


def day_start(now: float) -> float:
    """The start of ``now``'s day, UTC (POSIX time counts no leap seconds: every day is 86,400 s)."""
    return now - now % 86400


def budget_line(settings: LimitSettings, tokens: int, cost: float) -> str:
    """``/status``'s line about today's use against the budgets."""
    used = f"{tokens:,} tokens" + (f" of {settings.daily_tokens:,}" if settings.daily_tokens is not None else "")
    spent = f"${cost:.4f}" + (f" of ${settings.daily_cost_usd:.2f}" if settings.daily_cost_usd is not None else "")
    return f"Today (UTC): {used}, {spent}"


