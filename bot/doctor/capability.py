"""The doctor and upgrades: the ``chatgate doctor`` and ``chatgate migrate`` subcommands (nothing
of it runs in the bot)."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core

if TYPE_CHECKING:
    from bot.settings import Config


async def _doctor(config: Config, args: argparse.Namespace) -> int:
    from bot.doctor.checks import run_all
    from bot.doctor.table import table
    from bot.tracing import Redactor

    checks = await run_all(args.config, config)
    redact = Redactor(config.secret_values())
    print(redact(table(checks)))
    return 1 if any(c.failed for c in checks) else 0


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    doctor = sub.add_parser("doctor", help="check live what the bot needs (keys, tokens, database, sandbox, disk) "
                                           "and say what to fix; exit 1 when something failed")
    doctor.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else environment)")
    doctor.set_defaults(run=_doctor)
    from bot.doctor.migrate import add_parser

    add_parser(sub)


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[None]:
    yield None


SPEC = CapabilitySpec("doctor", _open, enabled=lambda config: False, cli=_cli)
