"""The tools recall offers every run, as a toolset (so that a sub-agent is offered them as its
parent is, under its parent's policy): ``history_search`` over the conversations the run's people
may see, and, when embeddings are on, ``memory_search`` by words and meaning in place of the
built-in one (``Offer.replacing``: only where the run has the built-in, so the policy still says).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.conversation import Conversation
from bot.recall.history import Hit, search, snippet, terms
from bot.recall.scope import platform_of, scope_of
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.toolset import Offer

if TYPE_CHECKING:
    from bot.recall.memory import MemoryIndex
    from bot.store.schema_steps import StepStore

DEFAULT_RESULTS = 8
MAX_RESULTS = 30


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def shown_hits(hits: Sequence[Hit], words: list[str], conversation: Conversation, query: str) -> str:
    """What the model (or the person, for ``/search``) reads of the messages found."""
    if not hits:
        where = "this group's conversation" if conversation.is_group else "your conversations"
        return f"Nothing in {where} matches {query!r}."
    lines = [f"{len(hits)} message{'s' if len(hits) != 1 else ''} found for {query!r}, best first "
             "(session and message ids link back to where it was said):"]
    for n, h in enumerate(hits, 1):
        who = ("the assistant" if h.role == "assistant"
               else "in the group" if conversation.is_group else "you")
        platform = platform_of(h.session_key)
        lines.append(f"{n}. {when(h.at)}{' on ' + platform if platform else ''}, {who} "
                     f"(session {h.session_id}, message {h.message_id}, turn {h.run_id}):\n   {snippet(h.text, words)}")
    return "\n".join(lines)


class History:
    """The searches of stored conversations, scoped by the conversation that asks."""

    def __init__(self, store: StepStore, identity_links: Mapping[str, Sequence[str]]) -> None:
        self._store = store
        self._links = identity_links

    async def find(self, conversation: Conversation, query: str, limit: int) -> tuple[list[Hit], list[str]]:
        words = terms(query)
        if not words:
            return [], words
        scope = scope_of(conversation, self._links)
        return await self._store.read(search(self._store.engine, scope, words, limit)), words

    async def answer(self, conversation: Conversation, query: str, limit: int = DEFAULT_RESULTS) -> str:
        hits, words = await self.find(conversation, query, limit)
        if not words:
            raise ToolError("the query has no words to search for; give a few keywords (e.g. `venue March`)")
        return shown_hits(hits, words, conversation, query)


def history_tool(history: History) -> Tool:
    @tool(category=ToolCategory.OTHER, name="history_search")
    async def history_search(ctx: ToolContext, query: str, max_results: int = DEFAULT_RESULTS) -> str:
        """Search past conversations by their words: in a DM, everything the person said to you and you
        answered, on every platform linked to them, earlier sessions (before /new) and summarised turns
        included; in a group, that group's conversation. Best matches first, each with its date, who
        said it and where (session, message).

        Args:
            query: Words to look for, e.g. `venue March` or `book wanted`.
            max_results: How many messages to return (up to 30).
        """
        if not 1 <= max_results <= MAX_RESULTS:
            raise ToolError(f"max_results must be between 1 and {MAX_RESULTS}")
        return await history.answer(ctx.conversation.root, query, max_results)

    return history_search


class RecallTools:
    """The ``Toolset`` of recall: the same tools for every run."""

    def __init__(self, history: History, memory: MemoryIndex | None) -> None:
        self.history = history
        self.memory = memory
        self._offer = Offer((history_tool(history),),
                            replacing=(memory.tool(),) if memory is not None and memory.hybrid else ())

    def offer(self, ctx: ToolContext) -> Offer:
        return self._offer
