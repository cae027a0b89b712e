"""schedule: the tool the model calls to make, list, cancel, pause and resume jobs.

Times come resolved by the model into typed fields (``at`` as ISO 8601, ``after`` as a
duration, ``every`` with an optional ``start``, or ``cron``), read in the person's zone
unless ``timezone`` names another; every answer gives times back in the person's zone, for
the model to confirm them in words. A job belongs to the person the run acts for, in the
chat the run serves: the tool names no other chat and no other person. A turn of several
people's messages makes a job that records them all, and it runs with the least rights among
them (``bot.schedules.scheduler``). A task's ``check`` command is taken only from someone who
may have commands run (exec, without approval).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from bot.conversation import Conversation
from bot.schedules import rules
from bot.schedules.checks import Check, CommandCheck, McpFind, mcp_check
from bot.schedules.jobs import Job, JobKind, RuleKind
from bot.schedules.service import Action, Creator, ScheduleError, Schedules
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool

log = logging.getLogger(__name__)

_DONE: dict[Action, str] = {"cancel": "Cancelled", "pause": "Paused", "resume": "Resumed"}


def schedule_tool(schedules: Schedules, may_check: Callable[[Conversation, bool], bool] = lambda c, owner: False,
                  find_tool: McpFind | None = None) -> Tool:
    """The ``schedule`` tool over ``schedules``; ``may_check`` says whether the person a run acts
    for may give a task a check command (exec for them, without approval); ``find_tool`` whether
    they may have an MCP tool as its check (None: no MCP servers)."""

    @tool(category=ToolCategory.OTHER, name="schedule")
    async def schedule(ctx: ToolContext, action: Literal["create", "list", "cancel", "pause", "resume"],
                       kind: Literal["reminder", "task"] = "reminder", text: str = "", at: str = "",
                       after: str = "", every: str = "", cron: str = "", start: str = "", timezone: str = "",
                       prompt: Literal["full", "minimal"] = "full", check_command: str = "", check_tool: str = "",
                       check_arguments: str = "", job_id: int = 0) -> str:
        """Reminders and scheduled tasks for the person you are talking to, in this chat. A
        reminder sends its text at the time, with no model call; a task runs you at the time with
        its text as the request, and your answer is sent to this chat (answer NO_REPLY then to
        stay silent). Give exactly one of at, after, every or cron when creating. Times come back
        in the person's time zone: tell them when it will run in those words.

        Args:
            action: create, list (the person's jobs here), cancel, pause or resume (by job_id).
            kind: reminder (text sent as it is) or task (you run at the time).
            text: What the reminder says, or what the task asks you to do.
            at: Once, at this ISO 8601 time; without an offset it is read in the person's zone.
            after: Once, after this long from now, like 20m, 2h30m or 1d.
            every: Repeatedly, at this interval, like 30m, 2h or 1d (whole days keep the local time).
            cron: Repeatedly, by this 5-field cron expression (minute hour day month weekday), like 0 9 * * MON.
            start: With every: the first run, ISO 8601 (default: one interval from now).
            timezone: An IANA zone (Europe/Berlin) for this job instead of the person's.
            prompt: A task's system prompt: full, or minimal (cheaper, without persona and context files).
            check_command: A task's shell command run first in the sandbox: empty output or exit 1 skips the task.
            check_tool: Instead, an MCP tool (mcp__server__tool) called first: an empty result skips the task.
            check_arguments: The check_tool's arguments, a JSON object.
            job_id: The job to cancel, pause or resume.
        """
        creator = Creator(ctx.conversation, ctx.user_id, others=tuple(u for u in ctx.people if u != ctx.user_id))
        zone, _ = await schedules.zone_of(creator.person)
        try:
            if action == "list":
                jobs = await schedules.mine(creator)
                if not jobs:
                    return f"No jobs for this person here. Their time zone is {zone}."
                lines = [await schedules.line(j, zone) for j in jobs]
                return f"Their jobs here (times in {zone}):\n" + "\n".join(lines)
            if action != "create":
                if job_id <= 0:
                    raise ToolError(f"give the job_id to {action}")
                verb: Action = "cancel" if action == "cancel" else "pause" if action == "pause" else "resume"
                changed = await schedules.change(creator, job_id, verb)
                return f"{_DONE[verb]}: {await schedules.line(changed, zone)}"
            check: Check | None = None
            if check_command.strip() and check_tool.strip():
                raise ToolError("give a check_command or a check_tool, not both")
            if check_tool.strip():
                if kind != "task":
                    raise ToolError("only a task can have a check_tool")
                found = find_tool(ctx, check_tool.strip()) if find_tool is not None else "there are no MCP tools here"
                if isinstance(found, str):
                    raise ToolError(f"{found}; make the task without a check_tool")
                check = mcp_check(check_tool, check_arguments)
            if check_command.strip():
                if kind != "task":
                    raise ToolError("only a task can have a check_command")
                if not may_check(ctx.conversation, ctx.sender_is_owner):
                    raise ToolError("a check_command needs the exec tool for this person without approval; "
                                    "make the task without one")
                check = CommandCheck(check_command.strip())
            when = await schedules.when(creator.person, at=at or None, after=after or None, every=every or None,
                                        cron=cron or None, start=start or None, zone=timezone or None)
            job = await schedules.create(creator, JobKind(kind), text, when, prompt=prompt, check=check)
        except (ScheduleError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        log.info("job %d made by the model session=%s run=%s", job.id, ctx.session_key, ctx.run_id)
        warning = await schedules.reach(job)
        return _made(job) + (f" Warn them too: {warning}" if warning else "")

    return schedule


def _made(job: Job) -> str:
    tz = rules.zone(job.when.zone)
    assert job.next_at is not None
    when = (f"once, {rules.local(job.next_at, tz)}" if job.when.kind is RuleKind.AT
            else f"{rules.describe(job.when)}, first {rules.local(job.next_at, tz)}")
    return (f"Made {job.kind} {job.id}: {when} (time zone {job.when.zone}). Tell the person this time in these "
            f"words; they can see their jobs with /tasks and cancel this one with /tasks cancel {job.id}.")
