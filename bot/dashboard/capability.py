"""The dashboard capability (``dashboard.enabled``): the operator's web page served inside
``chatgate run``, bound before the channels start (a busy port stops start-up before anything
is received); ``chatgate dashboard`` serves it alone on the bot's database, and ``chatgate
dashboard passwd`` sets a user's password. Its Operations page reads what the other running
capabilities offer (``McpSource``, ``JobsPanel``, ``ApprovalSource`` of ``bot.dashboard.sources``),
found by those Protocols, never by name. With several instances (PostgreSQL), its live board lists
and stops the runs of every instance (``bot.dashboard.elsewhere``), so it opens on every instance of a
cluster, also where ``dashboard.enabled`` is off: there it serves no page and only answers for
the runs of its instance. This module imports nothing of the dashboard but its config and its
table: ``open`` does.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core
from bot.dashboard.config import DashboardConfig
from bot.dashboard.tables import MIGRATIONS

if TYPE_CHECKING:
    from bot.config.schema import CoreConfig
    from bot.dashboard.elsewhere import Elsewhere
    from bot.dashboard.server import Dashboard


@asynccontextmanager
async def open_dashboard(core: Core) -> AsyncIterator[Dashboard | Elsewhere]:
    from bot.dashboard.elsewhere import Elsewhere
    from bot.dashboard.live import LiveBoard
    from bot.dashboard.server import Dashboard
    from bot.dashboard.settings import settings_of
    from bot.dashboard.sources import ApprovalSource, Bot, JobsPanel, McpSource, Operations, PeoplePolicy
    from bot.peers import Asks
    from bot.tracing import Redactor

    dispatcher = core.turns.dispatcher
    bot = Bot(core.events, dispatcher.registry, dispatcher.queued, core.turns.stop_run, core.channels,
              core.config.agent.model)
    running = list(core.running.values())  # the capabilities opened before this one
    mcp = next((c for c in running if isinstance(c, McpSource)), None)
    jobs = next((c.operator_jobs() for c in running if isinstance(c, JobsPanel)), None)
    operations = Operations(mcp, jobs, next((c for c in running if isinstance(c, ApprovalSource)), None))
    people = PeoplePolicy(core.limits.settings, core.config.owner_ids())
    peers = core.peers if isinstance(core.peers, Asks) else None
    if not core.config.section("dashboard", DashboardConfig).enabled:  # a cluster's instance without a page
        assert peers is not None  # (enabled says so)
        board = LiveBoard(bot)
        board.start()
        elsewhere = Elsewhere(peers, core.store, board, core.turns.stop_run)
        elsewhere.start()  # its runs show on the pages the other instances serve
        try:
            yield elsewhere
        finally:
            board.close()
        return
    async with Dashboard(settings_of(core.config), core.store, bot=bot, operations=operations, people=people,
                         redact=Redactor(core.config.secret_values())) as dashboard:
        if peers is not None and dashboard.board is not None:  # every instance's runs, and their Stop buttons
            dashboard.board.elsewhere = elsewhere = Elsewhere(peers, core.store, dashboard.board, core.turns.stop_run)
            elsewhere.start()
        yield dashboard


async def _alone(config: CoreConfig, args: argparse.Namespace) -> int:
    if args.action == "passwd":
        from bot.dashboard.passwd import passwd_command

        return passwd_command(args.passwd_config or args.config, args.user, args.role, generate=args.generate)
    from bot.dashboard.alone import serve_alone

    return await serve_alone(config)


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    dashboard = sub.add_parser("dashboard", help="serve the operator dashboard alone, against the bot's database "
                                                 "(`dashboard passwd` sets a user's password)")
    dashboard.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    dashboard.set_defaults(run=_alone, action=None, logs=True)
    actions = dashboard.add_subparsers(dest="action")
    passwd = actions.add_parser("passwd", help="set a dashboard user's password (read from the terminal, or "
                                               "one line of stdin) as a hash in the config file")
    passwd.add_argument("user", help="the name to log in with (letters, digits, . _ -)")
    passwd.add_argument("-c", "--config", dest="passwd_config", help="path to config.yaml (default: ./config.yaml)")
    passwd.add_argument("--role", choices=("viewer", "operator"), help="also set the role (new users: viewer)")
    passwd.add_argument("--generate", action="store_true", help="make a random token instead, and print it once")
    passwd.set_defaults(no_config=True, logs=False)


def _enabled(config: CoreConfig) -> bool:
    """Its page is on (``dashboard.enabled``), or the bot may run as several instances (PostgreSQL):
    then every instance answers for its runs on the page another one serves."""
    return config.section("dashboard", DashboardConfig).enabled or config.storage.url is not None


SPEC = CapabilitySpec("dashboard", open_dashboard, config=DashboardConfig, cli=_cli, migrations=MIGRATIONS,
                      enabled=_enabled)
