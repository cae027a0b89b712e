"""``schedules:``, the config section of reminders and scheduled tasks (composed into the config
by ``bot.config.schema``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field

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

    model_config = ConfigDict(json_schema_extra={"description": (
        "reminders (/remind) and scheduled tasks (the schedule tool)")})

    default_timezone: Annotated[str, AfterValidator(_iana_zone)] | None = Field(default=None, description="an IANA "
        "zone (Europe/Berlin) for people who set none with /tz; null: this machine's zone")
    grace: Annotated[Float, Field(ge=0)] = Field(default=3600.0, description="seconds: a job whose time passed "
        "while the bot was down runs late (marked \"late by N min\") when it is at most this late; older one-shots "
        "are listed to their creator in one message")
    max_per_person: Annotated[Int, Field(ge=1, le=10_000)] = Field(default=20, description="active and paused jobs "
        "one person may have")
    min_interval: Annotated[Float, Field(ge=0)] = Field(default=300.0, description="seconds between two occurrences "
        "of a recurring job")
    check_timeout: Annotated[Float, Field(gt=0, le=600)] = Field(default=60.0, description="seconds a task's check "
        "command may run (like exec, sandboxed)")
