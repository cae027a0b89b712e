"""The schedules capability: reminders and scheduled tasks. ``/remind``, ``/tasks`` and ``/tz``,
the ``schedule`` tool, the person's zone in ``/status``, and the scheduler, started once the
channels listen and what was owed went out (the first to stop: no job starts after).

A task's check may be a command (run as ``exec``, while exec is enabled) or a tool of a
toolset that grants tools by name (MCP servers, when configured), and passes the core's gate.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply
from bot.schedules.config import SchedulesConfig

if TYPE_CHECKING:
    from bot.channels import Channel
    from bot.config.schema import CoreConfig
    from bot.schedules.checks import GrantedTools
    from bot.schedules.jobs import Job
    from bot.schedules.operator import OperatorJobs
    from bot.schedules.scheduler import Scheduler
    from bot.schedules.service import Creator, Schedules
    from bot.tools.base import Tool, ToolContext


@dataclass(slots=True)
class Scheduling:
    """The running capability: the jobs (``schedules``), the loop that fires them, and the tool."""

    schedules: Schedules
    scheduler: Scheduler
    tool: Tool
    on_sweep: Callable[[Callable[[], Awaitable[None]]], None]

    def tools(self) -> Sequence[Tool]:
        return (self.tool,)

    async def status_lines(self, call: CommandCall) -> list[str]:
        zone, source = await self.schedules.zone_of(_creator(call).person)
        return [f"Time zone: {zone} ({source})"]

    def operator_jobs(self) -> OperatorJobs:
        """Every active and paused job, as the dashboard's Operations page lists and changes them."""
        from bot.schedules.operator import OperatorJobs

        return OperatorJobs(self.schedules.store, time.time, self.scheduler.wake, self.schedules.reach)

    def start(self) -> None:
        self.on_sweep(self.scheduler.adopt)  # tasks an instance died running: another runs them again
        self.scheduler.start()

    async def stop(self) -> None:
        await self.scheduler.aclose()


def _creator(call: CommandCall) -> Creator:
    from bot.schedules.service import Creator

    sender = call.msg.sender
    return Creator(call.conversation, sender.id, sender.name or sender.username or "")


async def _command(running: Scheduling, call: CommandCall) -> Reply:
    from bot.schedules import commands

    creator, args = _creator(call), call.command.args
    if call.command.name == "remind":
        return Reply(await commands.remind(running.schedules, creator, args, call.spell))
    if call.command.name == "tasks":
        return Reply(await commands.tasks(running.schedules, creator, args, call.spell))
    return Reply(await commands.timezone(running.schedules, creator.person, args, call.spell))


@asynccontextmanager
async def open_schedules(core: Core) -> AsyncIterator[Scheduling]:
    from bot.schedules.checks import GrantedTools, check_allowed, check_tools, checks_for
    from bot.schedules.scheduler import Scheduler, TaskTools
    from bot.schedules.service import Schedules, ScheduleSettings
    from bot.schedules.store import StoredSchedules
    from bot.schedules.tool import schedule_tool

    cfg = core.config
    sc, exec_on = cfg.section("schedules", SchedulesConfig), cfg.tools.exec
    settings = ScheduleSettings(sc.default_timezone, sc.grace, sc.max_per_person, sc.min_interval, sc.check_timeout)
    may_check = check_allowed(core.policy, core.rules, exec_enabled=exec_on.enabled, owners_only=exec_on.owners_only)
    granting = [t for t in core.toolsets if isinstance(t, GrantedTools)]
    find_tool = check_tools(_Granted(granting), core.policy, core.rules) if granting else None
    checks = checks_for(core.sandbox if exec_on.enabled else None, sc.check_timeout, find_tool,
                        core.tool("exec"))
    store = StoredSchedules(core.store)
    scheduler = Scheduler(store, core.turns, core.turns.outbox, core.access, settings,
                          platforms=core.channel_info,
                          limits=core.limits if core.limits.active else None,
                          tools=TaskTools(checks, may_check, core.workspaces.prepare, cfg.agent.id, gate=core.gate),
                          spell=core.spell, person_of=core.person_of)
    schedules = Schedules(store, settings, wake=scheduler.wake, reach=_reach(core.channels))
    yield Scheduling(schedules, scheduler, schedule_tool(schedules, may_check, find_tool), core.on_sweep)


def _reach(channels: Mapping[str, Channel]) -> Callable[[Job], Awaitable[str]]:
    """Why a job's messages may not reach its person, where its channel is ``Windowed`` (WhatsApp's 24 hours)."""
    from bot.channels import Windowed
    from bot.schedules.jobs import RuleKind

    async def reach(job: Job) -> str:
        channel = channels.get(job.conversation.platform)
        if not isinstance(channel, Windowed):
            return ""
        at = float(job.next_at) if job.when.kind is RuleKind.AT and job.next_at is not None else None
        return await channel.reach(job.conversation.target, str(job.kind), at)

    return reach


class _Granted:
    """The tools the toolsets that grant by name (MCP) let a run use, as a task's check finds them."""

    def __init__(self, toolsets: Sequence[GrantedTools]) -> None:
        self._toolsets = toolsets

    def granted(self, ctx: ToolContext, name: str) -> Tool | None:
        return next((found for t in self._toolsets if (found := t.granted(ctx, name)) is not None), None)


OFF = "Reminders and scheduled tasks are not available here."

async def _admin(config: CoreConfig, args: argparse.Namespace) -> int:
    from bot.capabilities.commandline import no_database, store_of
    from bot.schedules.admin import schedules_command

    if no_database(config):
        return 0
    return await schedules_command(store_of(config), args.action or "list", getattr(args, "job", None),
                                   everything=getattr(args, "all", False))


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    schedules = sub.add_parser("schedules", help="everyone's reminders and scheduled tasks: list, cancel")
    schedules.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    schedules.set_defaults(run=_admin)
    actions = schedules.add_subparsers(dest="action")
    listing = actions.add_parser("list", help="active and paused jobs (the default)")
    listing.add_argument("--all", action="store_true", help="finished ones too")
    cancel = actions.add_parser("cancel", help="cancel a job")
    cancel.add_argument("job", type=int, help="the job's id, as `schedules list` shows it")


SPEC = CapabilitySpec("schedules", open_schedules, config=SchedulesConfig, cli=_cli, commands=(
    CommandSpec("remind", _command, "a reminder: <when> <text>, when being in 20m, at 18:00 or tomorrow 9:00",
                capability="schedules", off=OFF),
    CommandSpec("tasks", _command, "your reminders and scheduled tasks here; cancel|pause|resume <id>",
                capability="schedules", off=OFF),
    CommandSpec("tz", _command, "your time zone; tz Europe/Berlin sets it", capability="schedules", off=OFF),
))
