"""Session titles: after a session's first exchange, a short title, made in the background.

``models.titles`` names the model that writes them (``session``: the session's own model,
the one its conversation uses; ``null``: no titles). The title is asked for once per
session, after the answer was handed to delivery, in a task of its own: it never delays an
answer, and whatever fails (the model, a timeout, an empty answer) is logged and ignored.
It is stored with the session (``chatgate sessions``, ``/status``); its call is traced and
charged like any model call, to the people the exchange served, and told (metrics, traces).
The models capability adds it after every run (``Core.post_run``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from bot.agent.run import RunRequest, RunResult, RunStatus
from bot.conversation import Conversation
from bot.limits import Bill, Meter
from bot.llm import Message
from bot.providers.base import Usage, complete
from bot.routing.router import Models
from bot.routing.spec import Route
from bot.store.base import ModelStore, Session, Store, Turn
from bot.tasks import OwnedTasks
from bot.tracing import Redactor, TraceBuilder, TraceRecord

log = logging.getLogger(__name__)

TITLE_SYSTEM = ("You name conversations. Write a title for the conversation below: at most six words, in its "
                "language, without quotes and without a full stop. Answer with the title only.")
EXCHANGE_CHARS = 1_500  # of the question and of the answer shown to the model
TITLE_TOKENS = 512  # room for a reasoning model's thinking too
TITLE_TIMEOUT = 60.0
MAX_STARTED = 10_000  # sessions remembered as titled (or being titled) by this process
TITLE_CHARS = 60
Told = Callable[[Conversation, TraceRecord], Awaitable[object]]


class TitleStore(Store, ModelStore, Protocol):
    """The store titles need: the title itself, and the turn that records the call's cost."""


def clean_title(text: str) -> str | None:
    """A model's title as shown: its first line, without quotes, Markdown marks or a final
    full stop, at most ``TITLE_CHARS`` characters; None when nothing is left."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = re.sub(r"^(?:title\s*:\s*)", "", line.strip(), flags=re.IGNORECASE)
    line = " ".join(line.strip(" \t#*_`\"'“”‘’").split()).rstrip(".")
    if not line:
        return None
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1].rstrip() + "…"


class Titles:
    def __init__(self, models: Models, store: TitleStore, *, agent_id: str = "main", meter: Meter | None = None,
                 redactor: Redactor | None = None, told: Told | None = None) -> None:
        self._models, self._store, self._told, self._agent_id, self._meter = models, store, told, agent_id, meter
        self._redactor = redactor or Redactor()
        self._started: dict[int, None] = {}  # session ids, oldest first
        self._tasks = OwnedTasks()

    def after(self, session: Session, conversation: Conversation, run_id: str, messages: tuple[Message, ...],
              answer: str, live: int | None, payers: tuple[str, ...]) -> None:
        """A run was stored: when it was its session's first exchange (its ``messages`` are all
        the session's ``live`` ones) and has an ``answer``, title the session in the background."""
        if self._models.catalog.titles is None or not answer or not messages or live != len(messages):
            return
        if session.id in self._started or conversation.key.subs:  # a sub-agent's session gets none
            return
        self._started[session.id] = None
        while len(self._started) > MAX_STARTED:
            del self._started[next(iter(self._started))]
        self._tasks.spawn(self._title(session, conversation, run_id, messages[0].text, answer, payers),
                          f"title {session.key}")

    async def post_run(self, request: RunRequest, result: RunResult) -> None:
        """A run's turn was stored (``Core.post_run``): ``after``."""
        self.after(request.session, request.conversation, request.run_id,
                   result.turn.messages if result.turn else (),
                   result.text if result.status is RunStatus.COMPLETED else "", result.live_messages, request.payers)

    async def aclose(self) -> None:
        await self._tasks.stop()

    async def _route(self, conversation: Conversation) -> Route:
        catalog = self._models.catalog
        named = catalog.get(catalog.titles)
        return self._models.route(named) if named is not None else (await self._models.plan(conversation)).route

    async def _title(self, session: Session, conversation: Conversation, run_id: str, question: str, answer: str,
                     payers: tuple[str, ...]) -> None:
        trace: TraceBuilder | None = None
        bill = Bill(payers, self._meter)
        try:
            if await self._store.title(session) is not None:
                return
            route = await self._route(conversation)
            spec = route.spec
            exchange = f"User: {question[:EXCHANGE_CHARS]}\n\nAssistant: {answer[:EXCHANGE_CHARS]}"
            request = replace(route.request(TITLE_SYSTEM, (Message.user(exchange),), ()),
                              max_tokens=min(spec.max_tokens, TITLE_TOKENS))
            trace = TraceBuilder(f"{run_id}-title", session.key, self._agent_id, spec.model, self._redactor,
                                 bill=bill, why=route.why_text)
            started = time.time()
            try:
                async with asyncio.timeout(TITLE_TIMEOUT):
                    completed = await complete(route.provider, request)
            except Exception:
                trace.llm(spec.model, started, Usage(), 0.0, is_error=True, preview="title")
                raise
            model = completed.model or spec.model
            trace.llm(model, started, completed.usage, route.cost(model, completed.usage),
                      preview=completed.message.text)
            title = clean_title(completed.message.text)
            if title is None:
                log.info("no title for session=%s: the model answered nothing usable", session.key)
            elif await self._store.set_title(session, title, model):
                log.info("session=%s titled by %s", session.key, spec.label)
            await self._record(session, conversation, trace, bill, "title", None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a title is a nicety: whatever went wrong is only logged
            log.info("no title for session=%s: %s", session.key, exc or type(exc).__name__)
            if trace is not None and trace.spans:
                await self._record(session, conversation, trace, bill, "failed", str(exc) or type(exc).__name__)

    async def _record(self, session: Session, conversation: Conversation, trace: TraceBuilder, bill: Bill,
                      status: str, error: str | None) -> None:
        """The title's call (tokens, cost, charges) as a turn without messages; then told."""
        record = trace.finish(status, 1, error)
        try:
            await self._store.append_turn(Turn(session, trace.run_id, (), trace.usage, trace.cost, trace.model, (),
                                               record, charges=bill.charges()))
        except Exception:  # noqa: BLE001 - a full disk: the call is lost from usage, nothing else
            log.warning("the title's usage of session=%s could not be stored", session.key, exc_info=True)
        if self._told is not None:
            await self._told(conversation, record)
