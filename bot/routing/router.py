"""``Models``: the installation's models, ready to call, and each conversation's choice.

A run asks ``plan(conversation)`` for its model: the one its people picked with ``/model``
(stored by the conversation's session key, so it outlives ``/new``, restarts and
compactions; a sub-agent's conversation uses its parent's), else the default; with the
routes it may fall back to. Without named models there is nothing to pick: no store is read.

The providers are made once per backend (``openai``, ``openai-responses``, ``anthropic``)
and shared by every model on it; ``aclose`` closes them. ``first_note`` says whether a
fallback is announced in a conversation for the first time: remembered in the database (every
instance knows it was announced), and in this process for the last ``MAX_NOTED`` pairs.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from bot.conversation import Conversation
from bot.providers.base import Provider
from bot.providers.pricing import Price, billed
from bot.routing.choice import plan_specs
from bot.routing.spec import Catalog, Cost, ModelSpec, Plan, Route, Why
from bot.store.base import ModelChoice, ModelStore, NoteStore

log = logging.getLogger(__name__)

MAX_NOTED = 10_000  # (conversation, fallback) pairs remembered here as announced (the database has them all)


class ModelNotes(ModelStore, NoteStore, Protocol):
    """What ``Models`` keeps in the store: the conversations' choices and the fallbacks announced."""


class Models:
    def __init__(self, catalog: Catalog, providers: Mapping[str, Provider], store: ModelNotes, cost: Cost) -> None:
        self.catalog = catalog
        self._providers = dict(providers)
        self._store = store
        self._cost = cost
        self._plans: dict[str | None, Plan] = {}
        self._noted: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.default = self._plan(None)

    # -- what a run uses -----------------------------------------------------------------

    async def plan(self, conversation: Conversation) -> Plan:
        """The conversation's model (chosen, else the default) and its fallbacks."""
        if not self.catalog.named:  # nothing can be chosen: no store read
            return self.default
        choice = await self._store.chosen_model(conversation.root.session_key)
        return self.default if choice is None else self._plan(choice.model)

    def route(self, spec: ModelSpec, why: Why = Why.DEFAULT) -> Route:
        return Route(spec, self._providers[spec.backend], _cost_of(spec.price, self._cost), why)

    async def first_note(self, session_key: str, route: Route) -> bool:
        """True the first time ``route`` (a fallback) answers in this conversation, on any instance."""
        key = (session_key, route.spec.label)
        if key in self._noted:
            return False
        first = await self._store.first_note(session_key, f"fallback:{route.spec.label}", None, time.time())
        self._noted[key] = None
        while len(self._noted) > MAX_NOTED:
            self._noted.popitem(last=False)
        return first

    # -- what /model reads and writes ----------------------------------------------------

    async def chosen(self, conversation: Conversation) -> ModelSpec | None:
        """The model the conversation's people picked, if it is still configured."""
        if not self.catalog.named:
            return None
        choice = await self._store.chosen_model(conversation.root.session_key)
        return self.catalog.get(choice.model) if choice is not None else None

    async def choose(self, conversation: Conversation, spec: ModelSpec | None, by: str) -> None:
        """Pick ``spec`` for the conversation (None: back to the default)."""
        key = conversation.root.session_key
        choice = None if spec is None else ModelChoice(spec.name, by, time.time())
        await self._store.choose_model(key, choice)
        log.info("model of session=%s set to %s by %s", key, spec.name if spec else "the default", by)

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()

    def _plan(self, chosen: str | None) -> Plan:
        plan = self._plans.get(chosen)
        if plan is None:
            primary, why, fallbacks = plan_specs(self.catalog, chosen)
            plan = Plan(self.route(primary, why), tuple(self.route(spec, Why.FALLBACK) for spec in fallbacks))
            self._plans[chosen] = plan
        return plan


def fallback_to(route: Route, nxt: Route, reason: str) -> Route:
    """``nxt`` answering for the model ``route`` stood for (the first one that failed, and why)."""
    if route.why is Why.FALLBACK:
        return replace(nxt, instead_of=route.instead_of, reason=route.reason)
    return replace(nxt, instead_of=route.spec.label, reason=reason)


def _cost_of(price: Price | None, table: Cost) -> Cost:
    """A model's own price whatever id the server names, else the price table."""
    return table if price is None else lambda model, usage: billed(price, usage)
