"""The recall capability: ``history_search`` and ``/search`` over past conversations, memory by
meaning (``memory.embeddings``), passages recalled into a turn (``memory.auto_recall``), and
``chatgate people forget PERSON``. Its section is ``memory:`` (``bot.recall.config``), its tables
``bot.recall.schema``."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply
from bot.recall.config import RecallConfig
from bot.recall.schema import MIGRATIONS

if TYPE_CHECKING:
    from bot.recall.running import Recall

SEARCH_RESULTS = 5


async def _search(recall: Recall, call: CommandCall) -> Reply:
    query = call.command.args.strip()
    if not query:
        return Reply(f"Give some words to look for: {call.spell('search')} venue March")
    return Reply(await recall.search_text(call.conversation, query, SEARCH_RESULTS))


@asynccontextmanager
async def _open(core: Core) -> AsyncIterator[Recall]:
    from bot.recall.running import open_recall

    async with open_recall(core) as recall:
        yield recall


def _cli(sub: argparse._SubParsersAction[Any]) -> None:
    from bot.recall.forget import add_commands

    add_commands(sub)


SPEC = CapabilitySpec(
    "recall", _open, key="memory", config=RecallConfig, migrations=MIGRATIONS, cli=_cli,
    derived=("recall_fts*", "recall_messages", "recall_scopes", "recall_sessions"),  # the index, kept by triggers
    commands=(CommandSpec("search", _search, "<words>: search your past conversations (this group's, in a group)",
                          "Search past conversations", capability="recall"),),
)

__all__: Sequence[str] = ("SPEC",)
