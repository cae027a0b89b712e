"""The running recall capability: its toolset offered to every run, ``/search``, its lines of
``/status``, and (``memory.auto_recall``) the passages it adds to a turn."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

from bot.capabilities.spec import Core
from bot.command_spec import CommandCall
from bot.conversation import Conversation
from bot.recall.config import RecallConfig
from bot.recall.tools import History, RecallTools, shown_hits
from bot.tools.base import ToolContext
from bot.tools.toolset import Offer

log = logging.getLogger(__name__)


class Recall:
    def __init__(self, config: RecallConfig, tools: RecallTools) -> None:
        self.config = config
        self.toolset = tools
        self.history = tools.history
        self.memory = tools.memory

    def offer(self, ctx: ToolContext) -> Offer:
        return self.toolset.offer(ctx)

    async def search_text(self, conversation: Conversation, query: str, limit: int) -> str:
        hits, words = await self.history.find(conversation.root, query, limit)
        if not words:
            return "Give a few words to look for (not only words like 'the' or 'what')."
        return shown_hits(hits, words, conversation, query)

    async def status_lines(self, call: CommandCall) -> Sequence[str]:
        if self.memory is None or not self.memory.hybrid:
            return ["Memory search: by words only (BM25); memory.embeddings is off."]
        e = self.config.embeddings
        recall = f"; {self.config.auto_recall} passages recalled per message" if self.config.auto_recall else ""
        return [f"Memory search: by words and meaning ({e.model}){recall}."]


@asynccontextmanager
async def open_recall(core: Core) -> AsyncIterator[Recall]:
    config = core.config.section("memory", RecallConfig)
    async with AsyncExitStack() as stack:
        memory = None
        if config.embeddings.enabled:
            from bot.recall.memory import open_memory

            memory = await stack.enter_async_context(open_memory(core, config))
        recall = Recall(config, RecallTools(History(core.store, core.config.agent.identity_links), memory))
        core.toolsets.append(recall)  # offered to every run from now on (none runs before the channels start)
        try:
            yield recall
        finally:
            if recall in core.toolsets:
                core.toolsets.remove(recall)
