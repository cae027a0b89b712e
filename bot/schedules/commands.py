"""The schedule commands' words: ``/remind``, ``/tasks`` and ``/tz`` (the table is
``bot.commands``; the intake hands each call here with the person who sent it).

``/remind <when> <text>`` makes a reminder without the model (``when``: ``in 20m``, ``at
18:00``, ``tomorrow 9:00``, ISO 8601, ``in 45s``); ``/tasks`` lists the person's jobs in this
chat, each with its id and next run in their zone; ``/tasks cancel|pause|resume <id>``
changes one; ``/tz`` shows their zone, ``/tz Europe/Berlin`` sets it, ``/tz default`` forgets it.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.schedules import rules
from bot.schedules.jobs import JobKind, RuleKind, When
from bot.schedules.service import Action, Creator, ScheduleError, Schedules

Spell = Callable[[str], str]  # how a command is typed on the platform at hand
_ACTIONS: dict[str, Action] = {"cancel": "cancel", "pause": "pause", "resume": "resume"}


async def remind(schedules: Schedules, creator: Creator, args: str, spell: Spell) -> str:
    usage = (f"Usage: {spell('remind')} <when> <text>, when being in 20m, at 18:00, tomorrow 9:00 or "
             "2025-03-10T09:00")
    if not args.strip():
        return usage
    zone, _ = await schedules.zone_of(creator.person)
    tz = rules.zone(zone)
    try:
        at, text = rules.parse_when(args, tz, schedules.now())
        if not text.strip():
            return f"What should I remind you of? {usage}"
        job = await schedules.create(creator, JobKind.REMINDER, text, When(RuleKind.AT, zone, at))
    except (ValueError, ScheduleError) as exc:
        return f"{_sentence(str(exc))} {usage}"
    warning = await schedules.reach(job)
    return (f"I'll remind you {rules.local(at, tz)} ({zone}). It is job {job.id}: "
            f"{spell('tasks')} cancel {job.id} cancels it." + (f"\n⚠ {warning}" if warning else ""))


async def tasks(schedules: Schedules, creator: Creator, args: str, spell: Spell) -> str:
    words = args.split()
    zone, _ = await schedules.zone_of(creator.person)
    if not words:
        jobs = await schedules.mine(creator)
        if not jobs:
            return f"You have no reminders or scheduled tasks here. {spell('remind')} makes one."
        return (f"Your jobs here (times in {zone}):\n" + "\n".join([await schedules.line(j, zone) for j in jobs])
                + f"\n{spell('tasks')} cancel|pause|resume <id> changes one.")
    action = _ACTIONS.get(words[0].lower())
    if action is None or len(words) != 2 or not words[1].isdigit():
        return f"Usage: {spell('tasks')} [cancel|pause|resume <id>]"
    try:
        job = await schedules.change(creator, int(words[1]), action)
    except ScheduleError as exc:
        return _sentence(str(exc))
    done = {"cancel": "Cancelled", "pause": "Paused", "resume": "Resumed"}[action]
    return f"{done}: {await schedules.line(job, zone)}"


async def timezone(schedules: Schedules, person: str, args: str, spell: Spell) -> str:
    name = args.strip()
    if not name:
        zone, source = await schedules.zone_of(person)
        return (f"Your time zone is {zone} ({source}). Set yours with {spell('tz')} Europe/Berlin "
                "(any IANA zone name).")
    try:
        if name.lower() in ("default", "reset"):
            await schedules.set_zone(person, None)
            zone, source = await schedules.zone_of(person)
            return f"Your time zone is {zone} again ({source})."
        chosen = await schedules.set_zone(person, name)
    except ScheduleError as exc:
        return _sentence(str(exc))
    return f"Your time zone is {chosen} now; your reminders and tasks are shown in it."


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."
