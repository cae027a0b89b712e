"""``schedules:``, the config section of reminders and scheduled tasks (composed into the config
by ``bot.config.schema``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from bot.config.types import CapabilitySection, Float, Int


def _iana_zone(value: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError("not an IANA time zone, such as Europe/Berlin or America/New_York") from None
    return value


class SchedulesConfig(CapabilitySection):
    """Reminders and scheduled tasks (``bot.schedules``); durations in seconds."""

    default_timezone: Annotated[str, AfterValidator(_iana_zone)] | None = None  # None: the machine's
    grace: Annotated[Float, Field(ge=0)] = 3600.0  # missed while down by less: run late; by more: listed
    max_per_person: Annotated[Int, Field(ge=1, le=10_000)] = 20  # active and paused jobs per person
    min_interval: Annotated[Float, Field(ge=0)] = 300.0  # between occurrences of a recurring job
    check_timeout: Annotated[Float, Field(gt=0, le=600)] = 60.0  # a task's check command
