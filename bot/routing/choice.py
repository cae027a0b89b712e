"""The hard parts of model choice as pure functions, tested with tables of cases: which model
a conversation uses and what it falls back to, which errors allow a fallback, who may pick
which model, and the button ids of ``/model`` (``model:<name>``)."""

from __future__ import annotations

import re

from bot.errors import ProviderBusyError, ProviderError, ProviderUnavailableError
from bot.routing.spec import Catalog, ModelSpec, Why

DEFAULT = "default"  # /model default: back to the default model
_CHOICE = re.compile(r"model:([A-Za-z0-9][A-Za-z0-9_.-]{0,47})")


def plan_specs(catalog: Catalog, chosen: str | None) -> tuple[ModelSpec, Why, tuple[ModelSpec, ...]]:
    """(the model, why it is the one, the models it falls back to: ``agent.fallbacks`` in order,
    none for a person's explicit choice unless ``fallback_on_choice``). A chosen name that is no
    longer configured counts as no choice."""
    spec = catalog.get(chosen)
    primary, why = (catalog.default, Why.DEFAULT) if spec is None else (spec, Why.CHOSEN)
    if why is Why.CHOSEN and not catalog.fallback_on_choice:
        return primary, why, ()
    fallbacks = tuple(found for name in catalog.fallbacks
                      if (found := catalog.get(name)) is not None and found.name != primary.name)
    return primary, why, fallbacks


def fallback_reason(error: ProviderError) -> str | None:
    """Why the model cannot answer now (busy, overloaded, down), when another model could; None
    when the error is not about "now": a bad key, a refused request or a prompt too long for the
    context window would fail on any model the same way, and keep their own sentence."""
    if isinstance(error, ProviderBusyError):
        return "rate-limited right now" if error.status == 429 else "overloaded right now"
    if isinstance(error, ProviderUnavailableError):
        return "unavailable right now"
    return None


def note_text(answered_by: str, instead_of: str, reason: str) -> str:
    """The one short note a chat sees the first time a fallback answers there."""
    return f"Answered by {answered_by}: {instead_of} is {reason}."


def may_pick(catalog: Catalog, spec: ModelSpec, person: str, *, owner: bool, group: bool = False) -> bool:
    """Owners may pick any model; in a group nobody else (everyone there pays for its model);
    a model with ``allowed`` only its people; any other model everyone when ``models.switch``
    is everyone."""
    if owner:
        return True
    if group:
        return False
    if spec.allowed is not None:
        return person in spec.allowed
    return catalog.switch == "everyone"


def pickable(catalog: Catalog, person: str, *, owner: bool, group: bool = False) -> tuple[ModelSpec, ...]:
    return tuple(spec for spec in catalog.named if may_pick(catalog, spec, person, owner=owner, group=group))


def may_switch(catalog: Catalog, person: str, *, owner: bool, group: bool = False) -> bool:
    """Whether ``person`` may change this chat's model at all (and so go back to the default):
    in a group only an owner, since the group's model is what everyone there is charged for."""
    if group and not owner:
        return False
    return owner or catalog.switch == "everyone" or bool(pickable(catalog, person, owner=owner))


def choice_id(name: str) -> str:
    """A button's id: at most 54 bytes, within every platform's room (Telegram's 64)."""
    return f"model:{name}"


def parse_choice(text: str) -> str | None:
    """The model name a pressed button carries (``default`` included), else None."""
    found = _CHOICE.fullmatch(text)
    return found.group(1) if found else None
