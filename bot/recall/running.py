"""The running recall capability: its toolset offered to every run (``history_search``, and the
hybrid ``memory_search`` with embeddings), ``/search``, its lines of ``/status``, and
(``memory.auto_recall``) the passages it puts into a turn (``AddsContext``)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from bot.agent.guard import GuardMode
from bot.capabilities.spec import Core
from bot.command_spec import CommandCall
from bot.conversation import Conversation
from bot.recall.config import RecallConfig
from bot.recall.memory import MemoryIndex, Payer
from bot.recall.remind import recalled_block
from bot.recall.tools import History, RecallTools, shown_hits
from bot.tools.base import ToolContext
from bot.tools.toolset import Offer

log = logging.getLogger(__name__)


class Recall:
    def __init__(self, config: RecallConfig, tools: RecallTools, guard: GuardMode, max_chars: int) -> None:
        self.config = config
        self.toolset = tools
        self.history = tools.history
        self.memory = tools.memory
        self._guard, self._max_chars = guard, max_chars

    def offer(self, ctx: ToolContext) -> Offer:
        return self.toolset.offer(ctx)

    async def context(self, ctx: ToolContext, text: str) -> str:
        """``memory.auto_recall`` passages of the workspace's memory for ``text`` ("" when off or none)."""
        if not self.config.auto_recall or self.memory is None or not text.strip():
            return ""
        found, _ = await self.memory.search(ctx.conversation.workspace, Path(os.path.realpath(ctx.workspace)), text,
                                            self.config.auto_recall, Payer(ctx.payers, ctx.run_id))
        return recalled_block(found, self.config.auto_recall_tokens, guard=self._guard, max_chars=self._max_chars,
                              session_key=ctx.session_key)

    async def search_text(self, conversation: Conversation, query: str, limit: int) -> str:
        hits, words = await self.history.find(conversation.root, query, limit)
        if not words:
            return "Give a few words to look for (not only words like 'the' or 'what')."
        return shown_hits(hits, words, conversation, query)

    async def status_lines(self, call: CommandCall) -> Sequence[str]:
        recall = f"; {self.config.auto_recall} passages recalled per message" if self.config.auto_recall else ""
        if self.memory is None or not self.memory.hybrid:
            return [f"Memory search: by words only (BM25), memory.embeddings is off{recall}."]
        return [f"Memory search: by words and meaning ({self.config.embeddings.model}){recall}."]


@asynccontextmanager
async def open_recall(core: Core) -> AsyncIterator[Recall]:
    config = core.config.section("memory", RecallConfig)
    agent = core.config.agent
    async with AsyncExitStack() as stack:
        embeddings = None
        if config.embeddings.enabled:
            from bot.recall.embeddings import Embeddings

            embeddings = Embeddings(config.embeddings)
            stack.push_async_callback(embeddings.aclose)
        memory = MemoryIndex(core.store, embeddings, core.limits) if embeddings or config.auto_recall else None
        tools = RecallTools(History(core.store, agent.identity_links), memory)
        recall = Recall(config, tools, GuardMode(agent.input_guard), agent.max_message_chars)
        core.toolsets.append(recall)  # offered to every run from now on (none runs before the channels start)
        try:
            yield recall
        finally:
            if recall in core.toolsets:
                core.toolsets.remove(recall)
