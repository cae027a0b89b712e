"""A job's time rules, as pure functions: data in, data out, no event loop.

Instants are UTC epoch seconds (``int``); a rule (``When``) keeps its IANA zone beside it, so
the next occurrence is computed in the zone's local time: a 09:00 job stays at 09:00 across
a DST change. Cron expressions are evaluated by ``cronsim`` (the evaluator healthchecks.io
runs), which follows Debian cron at a DST change for jobs at a fixed time: on the spring day
without 02:30 a 02:30 job runs once, when the clocks jump (03:00); on the autumn day with
02:30 twice it runs once, the first time. An ``every`` rule of whole days steps in local
calendar days (a nonexistent local time moves forward by the gap); any other interval is
exact seconds.

Parsing what people and the model write: ``parse_duration`` ("2h30m", "45s", "20 min"),
``parse_instant`` (ISO 8601 with or without an offset), and ``parse_when`` for ``/remind``
("in 20m", "at 18:00", "tomorrow 9:00", ISO 8601). Each raises ``ValueError`` with a
sentence a person can act on. ``first_run`` is where every new job's time is checked (the
``/remind`` command and the ``schedule`` tool both make jobs through it): nothing more than
``HORIZON_YEARS`` ahead, so that every instant a job holds is one the calendar can show.

Showing an instant (``local``) is total: a row written by hand with an instant the calendar
cannot hold is shown as its number, never as an error.
"""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from bot.schedules.jobs import RuleKind, When

DAY = 86400
GAP_SAMPLES = 200  # occurrences looked at for the smallest gap of a cron rule
HORIZON_YEARS = 10
HORIZON = 3653 * DAY  # ten years and their leap days: the furthest ahead a job may be set
_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": DAY, "day": DAY, "days": DAY,
    "w": 7 * DAY, "week": 7 * DAY, "weeks": 7 * DAY,
}
_PART = re.compile(r"(\d+)\s*([a-z]+)")
_DURATION = re.compile(r"^(?:\d+\s*[a-z]+\s*)+$")
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"^\d{1,2}:\d{2}")


# -- zones ---------------------------------------------------------------------------


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (``Europe/Berlin``); ``ValueError`` for a name it is not."""
    if not name or name != name.strip() or name.startswith(("/", ".")) or ".." in name:
        raise ValueError(f"{name!r} is not an IANA time zone (such as Europe/Berlin or America/New_York)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA time zone (such as Europe/Berlin or America/New_York)") from None


def canonical_zone(name: str) -> str:
    """``name`` as the zone database spells it ("europe/berlin" -> "Europe/Berlin")."""
    try:
        zone(name)
        return name
    except ValueError:
        lowered = name.strip().lower()
        for known in available_timezones():
            if known.lower() == lowered:
                return known
        raise


def machine_zone() -> str:
    """This machine's IANA zone: ``TZ``, else where /etc/localtime points, else /etc/timezone,
    else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text().strip())
    except OSError:
        pass
    for name in candidates:
        try:
            zone(name)
            return name
        except ValueError:
            continue
    return "UTC"


# -- occurrences -----------------------------------------------------------------------


def next_after(when: When, t: int) -> int | None:
    """The first occurrence strictly after ``t``; None when there is none (a past ``at``)."""
    if when.kind is RuleKind.AT:
        return when.anchor if when.anchor > t else None
    if when.kind is RuleKind.EVERY:
        if t < when.anchor:
            return when.anchor
        if when.every % DAY == 0:
            return _next_local_day(when, t)
        return when.anchor + ((t - when.anchor) // when.every + 1) * when.every
    start = datetime.fromtimestamp(t, zone(when.zone))
    return int(next(CronSim(when.cron, start)).timestamp())


def latest_until(when: When, t: int) -> int | None:
    """The last occurrence at or before ``t``; None when there is none yet."""
    if when.kind is RuleKind.AT:
        return when.anchor if when.anchor <= t else None
    if when.kind is RuleKind.EVERY:
        if t < when.anchor:
            return None
        if when.every % DAY == 0:
            days = when.every // DAY
            k = _days_from_anchor(when, t) // days * days
            while k >= 0 and (at := _local_day(when, k)) > t:
                k -= days
            return at if k >= 0 else None
        return when.anchor + (t - when.anchor) // when.every * when.every
    start = datetime.fromtimestamp(t + 1, zone(when.zone))
    return int(next(CronSim(when.cron, start, reverse=True)).timestamp())


def first_run(when: When, now: int) -> int | None:
    """A new job's first occurrence from ``now`` (None: its one time has passed); ``ValueError``
    when that, or the time between its runs, is more than ``HORIZON`` away."""
    if when.kind is RuleKind.EVERY and when.every > HORIZON:
        raise ValueError(f"every {duration_text(when.every)} is more than {HORIZON_YEARS} years between runs; "
                         f"pick an interval within {HORIZON_YEARS} years")
    first = when.anchor if when.kind is not RuleKind.CRON and when.anchor > now else next_after(when, now)
    if first is not None and first - now > HORIZON:
        raise ValueError(f"that is more than {HORIZON_YEARS} years from now; pick a time within {HORIZON_YEARS} years")
    return first


def smallest_gap(when: When, start: int) -> int | None:
    """The shortest time between two occurrences from ``start`` on (a cron rule: among the
    next ``GAP_SAMPLES``); None for a one-shot."""
    if when.kind is RuleKind.AT:
        return None
    if when.kind is RuleKind.EVERY:
        return when.every
    ticks = CronSim(when.cron, datetime.fromtimestamp(start, zone(when.zone)))
    times = [int(next(ticks).timestamp()) for _ in range(GAP_SAMPLES)]
    return min(b - a for a, b in zip(times, times[1:]))


def _local_day(when: When, k: int) -> int:
    """The anchor's local wall time ``k`` days later, as an instant (a nonexistent wall time
    moves forward by the gap; a repeated one is its first)."""
    tz = zone(when.zone)
    local = datetime.fromtimestamp(when.anchor, tz).replace(tzinfo=None) + timedelta(days=k)
    return int(local.replace(tzinfo=tz).timestamp())


def _days_from_anchor(when: When, t: int) -> int:
    tz = zone(when.zone)
    anchor = datetime.fromtimestamp(when.anchor, tz).date()
    return (datetime.fromtimestamp(t, tz).date() - anchor).days


def _next_local_day(when: When, t: int) -> int:
    days = when.every // DAY
    k = max(0, _days_from_anchor(when, t) // days * days)
    while (at := _local_day(when, k)) <= t:
        k += days
    return at


# -- parsing ---------------------------------------------------------------------------


def parse_duration(text: str) -> int:
    """Seconds in ``text``: "45s", "20m", "2h30m", "1h 30m", "20 min", "2 hours", "1d", "1w"."""
    cleaned = text.strip().lower()
    if not _DURATION.match(cleaned):
        raise ValueError(f"{text!r} is not a duration (write it like 45s, 20m, 2h30m or 1d)")
    total = 0
    for amount, unit in _PART.findall(cleaned):
        if unit not in _UNITS:
            raise ValueError(f"{unit!r} in {text!r} is not a unit (use s, m, h, d or w)")
        total += int(amount) * _UNITS[unit]
    if total <= 0:
        raise ValueError(f"{text!r} is no time at all")
    return total


def parse_instant(text: str, tz: ZoneInfo) -> int:
    """An ISO 8601 date and time: with an offset ("2025-03-10T09:00+01:00", "...Z") as written,
    without one in ``tz`` ("2025-03-10T09:00", "2025-03-10 09:00"); a date alone is 09:00."""
    cleaned = text.strip()
    try:
        parsed = datetime.fromisoformat(cleaned)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time (write it like 2025-03-10T09:00+01:00)") from None
    if len(cleaned) == 10:  # a date alone
        parsed = parsed.replace(hour=9)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=tz)
    return math.ceil(parsed.timestamp())


def parse_when(text: str, tz: ZoneInfo, now: float) -> tuple[int, str]:
    """``/remind``'s arguments: (the instant, the rest of the text). ``when`` is one of
    ``in <duration>``, ``at <time>`` (today, or tomorrow once past), ``tomorrow [at] <time>``,
    ``today [at] <time>``, or an ISO 8601 date and time (a space between date and time is fine)."""
    words = text.split()
    if not words:
        raise ValueError("say when and what, like: in 20m stretch")
    head = words[0].lower()
    if head == "in":
        # the longest run of words after "in" that is a duration: "in 1h 30m tea", "in 20 min tea"
        for end in range(len(words), 1, -1):
            try:
                seconds = parse_duration(" ".join(words[1:end]))
            except ValueError:
                continue
            return math.ceil(now) + seconds, " ".join(words[end:])
        raise ValueError(f"{' '.join(words[1:3]) or 'nothing'!r} after 'in' is not a duration "
                         "(write it like 45s, 20m, 2h30m or 1d)")
    if head in ("at", "today", "tomorrow"):
        rest = words[1:]
        day = {"at": None, "today": 0, "tomorrow": 1}[head]
        if head != "at" and rest and rest[0].lower() == "at":
            rest = rest[1:]
        if not rest:
            raise ValueError(f"say a time after {head!r}, like {head} 18:00")
        clock, rest = _clock_words(rest)
        local_now = datetime.fromtimestamp(now, tz)
        at = _at_local(local_now, clock, 0 if day is None else day, tz)
        if day is None and at <= now:
            at = _at_local(local_now, clock, 1, tz)
        if at <= now:
            raise ValueError(f"{head} {clock[0]:02d}:{clock[1]:02d} has passed already")
        return at, " ".join(rest)
    if _DATE.match(head):
        if len(words) > 1 and _TIME.match(words[1]):  # "2025-03-10 09:00": date and time as two words
            candidate, rest = f"{words[0]}T{words[1]}", words[2:]
        else:
            candidate, rest = words[0], words[1:]
        at = parse_instant(candidate, tz)
        if at <= now:
            raise ValueError(f"{candidate.replace('T', ' ')} has passed already")
        return at, " ".join(rest)
    raise ValueError("say when first: in 20m, at 18:00, tomorrow 9:00 or 2025-03-10T09:00")


def _clock_words(words: list[str]) -> tuple[tuple[int, int], list[str]]:
    """The time of day at the start of ``words`` ("18:00", "9", "6pm", "6:30 pm") and what follows."""
    for take in (2, 1):
        if len(words) < take:
            continue
        match = _CLOCK.match(" ".join(words[:take]).lower())
        if match and (take == 1 or match.group(3)):
            hour, minute = int(match.group(1)), int(match.group(2) or 0)
            if match.group(3):
                if not 1 <= hour <= 12:
                    break
                hour = hour % 12 + (12 if match.group(3) == "pm" else 0)
            if hour > 23 or minute > 59:
                break
            return (hour, minute), words[take:]
    raise ValueError(f"{words[0]!r} is not a time of day (write it like 18:00 or 6pm)")


def _at_local(local_now: datetime, clock: tuple[int, int], days: int, tz: ZoneInfo) -> int:
    wall = (local_now.replace(tzinfo=None) + timedelta(days=days)).replace(
        hour=clock[0], minute=clock[1], second=0, microsecond=0)
    return int(wall.replace(tzinfo=tz).timestamp())


def check_cron(expression: str) -> str:
    """A 5-field cron expression, normalised; ``ValueError`` when it is not one."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"{expression!r} is not a 5-field cron expression (minute hour day month weekday, "
                         "like 0 9 * * MON)")
    normalised = " ".join(fields)
    try:
        next(CronSim(normalised, datetime(2000, 1, 1, tzinfo=UTC)))
    except (CronSimError, StopIteration) as exc:
        raise ValueError(f"{expression!r} is not a valid cron expression: {exc}") from None
    return normalised


# -- showing ---------------------------------------------------------------------------


def local(t: int, tz: tzinfo, form: str = "%a %d %b %Y %H:%M %Z") -> str:
    """An instant as a person reads it in their zone: ``Mon 10 Mar 2025 09:00 CET``; one the
    calendar cannot hold (a row written by hand) as its number, never an error."""
    try:
        return datetime.fromtimestamp(t, tz).strftime(form)
    except (OverflowError, ValueError, OSError):
        return f"instant {t} (outside the calendar)"


def shown_zone(name: str) -> tzinfo:
    """The zone ``name`` for showing a stored job's times; UTC when the name is none (a row
    written by hand), so that a list of jobs never fails on one of them."""
    try:
        return zone(name)
    except ValueError:
        return UTC


def duration_text(seconds: int) -> str:
    """``9000`` -> ``2h30m``."""
    parts = []
    for unit, size in (("d", DAY), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def describe(when: When) -> str:
    """The rule in words: ``once``, ``every 2h30m``, ``cron 0 9 * * MON (Europe/Berlin)``."""
    if when.kind is RuleKind.AT:
        return "once"
    if when.kind is RuleKind.EVERY:
        return f"every {duration_text(when.every)}" + (f" ({when.zone})" if when.every % DAY == 0 else "")
    return f"cron {when.cron} ({when.zone})"
