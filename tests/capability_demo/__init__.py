"""A capability package for the registry's tests: a section under a core one (``tools.demo``),
a table, a subcommand."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bot.capabilities.spec import CapabilitySpec, Core
from bot.config import CapabilitySection
from bot.store.schema_steps import Migration


class DemoConfig(CapabilitySection):
    enabled: bool = False
    greeting: str = "hi"

    def describe(self) -> list[str]:
        return [f"demo       says {self.greeting}"] if self.enabled else []


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[str]:
    yield core.config.section("tools.demo", DemoConfig).greeting


async def _hello(config: Any, args: argparse.Namespace) -> int:
    print(config.section("tools.demo", DemoConfig).greeting)
    return 0


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    hello = sub.add_parser("demo-hello", help="say the greeting")
    hello.add_argument("-c", "--config")
    hello.set_defaults(run=_hello)


SPEC = CapabilitySpec("demo", _open, config=DemoConfig, key="tools.demo", cli=_cli,
                      enabled=lambda config: config.section("tools.demo", DemoConfig).enabled,
                      migrations=(Migration("demo/0001_greetings", "CREATE TABLE demo_greetings (id {id}, text TEXT);"),))
