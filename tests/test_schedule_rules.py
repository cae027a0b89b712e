"""Schedule rules as pure functions (issue 23): DST tables for Europe/Berlin and America/New_York
(the spring gap, the autumn repeat), the ``/remind`` parsing table, durations and cron checks."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bot.schedules.jobs import RuleKind, When
from bot.schedules.rules import (
    canonical_zone,
    check_cron,
    describe,
    latest_until,
    local,
    next_after,
    parse_duration,
    parse_instant,
    parse_when,
    smallest_gap,
    zone,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def ts(text: str, tz: ZoneInfo) -> int:
    """``2025-03-30 02:30`` read in ``tz`` (fold 0), as epoch seconds."""
    return int(datetime.fromisoformat(text).replace(tzinfo=tz).timestamp())


def iso(t: int, tz: ZoneInfo) -> str:
    return datetime.fromtimestamp(t, tz).isoformat()


def run(when: When, start: int, n: int) -> list[str]:
    out, t = [], start
    for _ in range(n):
        nxt = next_after(when, t)
        assert nxt is not None
        out.append(iso(nxt, ZoneInfo(when.zone)))
        t = nxt
    return out


# -- DST: cron ------------------------------------------------------------------------------

CRON_TABLE = [
    # Europe/Berlin: 2025-03-30 02:00 -> 03:00 (no 02:30); 2025-10-26 03:00 -> 02:00 (02:30 twice)
    ("Europe/Berlin", "30 2 * * *", "2025-03-29 12:00",
     ["2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"]),  # the day without 02:30 runs once
    ("Europe/Berlin", "30 2 * * *", "2025-10-25 12:00",
     ["2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]),  # the day with 02:30 twice runs once
    ("Europe/Berlin", "0 9 * * *", "2025-03-29 12:00",
     ["2025-03-30T09:00:00+02:00", "2025-03-31T09:00:00+02:00"]),  # 09:00 stays 09:00 local
    ("Europe/Berlin", "0 9 * * *", "2025-10-25 12:00",
     ["2025-10-26T09:00:00+01:00", "2025-10-27T09:00:00+01:00"]),
    ("Europe/Berlin", "*/30 * * * *", "2025-03-30 01:15",
     ["2025-03-30T01:30:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T03:30:00+02:00"]),
    # America/New_York: 2025-03-09 02:00 -> 03:00; 2025-11-02 02:00 -> 01:00 (01:30 twice)
    ("America/New_York", "30 2 * * *", "2025-03-08 12:00",
     ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"]),
    ("America/New_York", "30 1 * * *", "2025-11-01 12:00",
     ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"]),
    ("America/New_York", "0 9 * * MON-FRI", "2025-03-07 12:00",
     ["2025-03-10T09:00:00-04:00", "2025-03-11T09:00:00-04:00"]),
    ("America/New_York", "0 9 * * *", "2025-11-01 12:00",
     ["2025-11-02T09:00:00-05:00", "2025-11-03T09:00:00-05:00"]),
]


@pytest.mark.parametrize(("tz", "cron", "start", "expected"), CRON_TABLE)
def test_cron_rules_across_dst(tz: str, cron: str, start: str, expected: list[str]) -> None:
    when = When(RuleKind.CRON, tz, ts(start, ZoneInfo(tz)), cron=cron)
    assert run(when, ts(start, ZoneInfo(tz)), len(expected)) == expected


def test_an_occurrence_in_the_repeated_hour_is_not_run_again_in_its_second_pass() -> None:
    when = When(RuleKind.CRON, "America/New_York", 0, cron="30 1 * * *")
    first = ts("2025-11-02 01:30", NEW_YORK)  # fold 0: EDT
    second_pass = first + 3600 + 60  # 01:31 EST
    assert iso(next_after(when, first) or 0, NEW_YORK) == "2025-11-03T01:30:00-05:00"
    assert iso(next_after(when, second_pass) or 0, NEW_YORK) == "2025-11-03T01:30:00-05:00"


# -- DST: every ----------------------------------------------------------------------------

EVERY_TABLE = [
    # whole days step in local days: 09:00 stays 09:00
    ("Europe/Berlin", 86400, "2025-03-28 09:00",
     ["2025-03-29T09:00:00+01:00", "2025-03-30T09:00:00+02:00", "2025-03-31T09:00:00+02:00"]),
    ("America/New_York", 7 * 86400, "2025-10-27 09:00",
     ["2025-11-03T09:00:00-05:00", "2025-11-10T09:00:00-05:00"]),
    # a wall time the spring day lacks moves forward by the gap, and only on that day
    ("Europe/Berlin", 86400, "2025-03-29 02:30",
     ["2025-03-30T03:30:00+02:00", "2025-03-31T02:30:00+02:00"]),
    # the repeated hour: its first pass, once
    ("America/New_York", 86400, "2025-11-01 01:30",
     ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"]),
    # other intervals are exact seconds: 2 h across the gap is 2 h
    ("Europe/Berlin", 7200, "2025-03-30 00:00",
     ["2025-03-30T03:00:00+02:00", "2025-03-30T05:00:00+02:00"]),
]


@pytest.mark.parametrize(("tz", "every", "anchor", "expected"), EVERY_TABLE)
def test_every_rules_across_dst(tz: str, every: int, anchor: str, expected: list[str]) -> None:
    start = ts(anchor, ZoneInfo(tz))
    assert run(When(RuleKind.EVERY, tz, start, every), start, len(expected)) == expected


def test_every_starts_at_its_anchor_and_the_latest_occurrence_is_found() -> None:
    anchor = ts("2025-03-28 09:00", BERLIN)
    daily = When(RuleKind.EVERY, "Europe/Berlin", anchor, 86400)
    assert next_after(daily, anchor - 5) == anchor
    assert latest_until(daily, anchor - 5) is None
    assert iso(latest_until(daily, ts("2025-03-30 12:00", BERLIN)) or 0, BERLIN) == "2025-03-30T09:00:00+02:00"
    assert latest_until(daily, ts("2025-03-30 09:00", BERLIN)) == ts("2025-03-30 09:00", BERLIN)
    hourly = When(RuleKind.EVERY, "UTC", 1000, 3600)
    assert latest_until(hourly, 1000 + 3 * 3600 + 5) == 1000 + 3 * 3600
    cron = When(RuleKind.CRON, "Europe/Berlin", 0, cron="0 9 * * *")
    assert latest_until(cron, ts("2025-03-30 09:00", BERLIN)) == ts("2025-03-30 09:00", BERLIN)
    assert latest_until(cron, ts("2025-03-30 08:59", BERLIN)) == ts("2025-03-29 09:00", BERLIN)


def test_a_one_shot_has_one_occurrence() -> None:
    at = When(RuleKind.AT, "UTC", 5000)
    assert next_after(at, 4999) == 5000 and next_after(at, 5000) is None
    assert latest_until(at, 4999) is None and latest_until(at, 6000) == 5000
    assert smallest_gap(at, 0) is None


def test_the_smallest_gap_of_a_rule() -> None:
    assert smallest_gap(When(RuleKind.EVERY, "UTC", 0, 600), 0) == 600
    assert smallest_gap(When(RuleKind.CRON, "UTC", 0, cron="*/2 * * * *"), 0) == 120
    assert smallest_gap(When(RuleKind.CRON, "UTC", 0, cron="0 9,10 * * *"), 0) == 3600
    assert smallest_gap(When(RuleKind.CRON, "Europe/Berlin", 0, cron="0 9 * * MON"), 0) == 7 * 86400


# -- /remind -------------------------------------------------------------------------------

NOW = ts("2025-03-29 12:00", BERLIN)  # a Saturday, the day before Berlin's spring change

REMIND_TABLE = [
    ("in 20m stretch", "2025-03-29T12:20:00+01:00", "stretch"),
    ("in 45s tea", "2025-03-29T12:00:45+01:00", "tea"),
    ("in 2h30m call mum", "2025-03-29T14:30:00+01:00", "call mum"),
    ("in 1h 30m call mum", "2025-03-29T13:30:00+01:00", "call mum"),
    ("in 20 min buy 2 eggs", "2025-03-29T12:20:00+01:00", "buy 2 eggs"),
    ("in 1d water plants", "2025-03-30T13:00:00+02:00", "water plants"),  # 24 h later, one clock hour on
    ("at 18:00 cook", "2025-03-29T18:00:00+01:00", "cook"),
    ("at 6pm cook", "2025-03-29T18:00:00+01:00", "cook"),
    ("at 6:30 pm cook", "2025-03-29T18:30:00+01:00", "cook"),
    ("at 11:00 run", "2025-03-30T11:00:00+02:00", "run"),  # passed today: tomorrow
    ("tomorrow 9:00 gym", "2025-03-30T09:00:00+02:00", "gym"),
    ("tomorrow at 9am gym", "2025-03-30T09:00:00+02:00", "gym"),
    ("tomorrow 2:30 gap", "2025-03-30T03:30:00+02:00", "gap"),  # 02:30 does not exist that night
    ("today 23:59 late", "2025-03-29T23:59:00+01:00", "late"),
    ("2025-04-01T09:00+01:00 iso", "2025-04-01T10:00:00+02:00", "iso"),
    ("2025-04-01T07:00Z zulu", "2025-04-01T09:00:00+02:00", "zulu"),
    ("2025-04-01T09:00 local", "2025-04-01T09:00:00+02:00", "local"),
    ("2025-04-01 09:00 spaced", "2025-04-01T09:00:00+02:00", "spaced"),
    ("2025-04-01 dated", "2025-04-01T09:00:00+02:00", "dated"),
]


@pytest.mark.parametrize(("text", "expected", "rest"), REMIND_TABLE)
def test_remind_parsing(text: str, expected: str, rest: str) -> None:
    at, what = parse_when(text, BERLIN, NOW)
    assert (iso(at, BERLIN), what) == (expected, rest)


REMIND_ERRORS = [
    ("", "say when"),
    ("stretch in 20m", "say when first"),
    ("in soon stretch", "not a duration"),
    ("in 5 parsecs", "not a duration"),
    ("at noon eat", "not a time of day"),
    ("at 25:00 eat", "not a time of day"),
    ("today 11:00 past", "has passed"),
    ("tomorrow", "say a time"),
    ("2025-03-01T09:00+01:00 past", "has passed"),
    ("2025-13-01T09:00 bad", "not an ISO 8601"),
]


@pytest.mark.parametrize(("text", "says"), REMIND_ERRORS)
def test_remind_parsing_refuses_with_a_sentence(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_when(text, BERLIN, NOW)


@pytest.mark.parametrize(("text", "seconds"), [
    ("45s", 45), ("20m", 1200), ("2h30m", 9000), ("1h 30m", 5400), ("20 min", 1200), ("2 hours", 7200),
    ("1d", 86400), ("1w", 604800), ("90 seconds", 90),
])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "20", "0m", "5 parsecs", "-5m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_instants_and_zones() -> None:
    assert parse_instant("2025-04-01T09:00:00+00:00", BERLIN) == ts("2025-04-01 11:00", BERLIN)
    assert parse_instant("2025-04-01T09:00:00.2", BERLIN) == ts("2025-04-01 09:00", BERLIN) + 1  # whole seconds, up
    assert canonical_zone("europe/berlin") == "Europe/Berlin" and canonical_zone("UTC") == "UTC"
    for bad in ("Mars/Olympus", "../etc/passwd", "", " Europe/Berlin"):
        with pytest.raises(ValueError, match="IANA"):
            zone(bad)
    assert local(ts("2025-03-10 09:00", BERLIN), BERLIN) == "Mon 10 Mar 2025 09:00 CET"


def test_cron_expressions_are_checked() -> None:
    assert check_cron(" 0  9 * * MON ") == "0 9 * * MON"
    for bad in ("0 9 * *", "0 0 9 * * *", "61 * * * *", "0 0 31 2 *", "@daily"):
        with pytest.raises(ValueError, match="cron"):
            check_cron(bad)
    assert describe(When(RuleKind.CRON, "Europe/Berlin", 0, cron="0 9 * * MON")) == "cron 0 9 * * MON (Europe/Berlin)"
    assert describe(When(RuleKind.EVERY, "UTC", 0, 9000)) == "every 2h30m"
