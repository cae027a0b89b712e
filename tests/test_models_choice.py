"""Model choice as data: which model, what falls back, who may pick, button ids, titles (no event loop)."""

from __future__ import annotations

import json

import pytest

from bot.errors import (
    ContextTooLongError,
    ProviderAuthError,
    ProviderBusyError,
    ProviderError,
    ProviderRequestError,
    ProviderUnavailableError,
)
from bot.models.titles import clean_title
from bot.providers.pricing import Price
from bot.routing import Catalog, ModelSpec, Route, Why, fallback_reason, fallback_to
from bot.routing.choice import choice_id, may_pick, may_switch, parse_choice, pickable, plan_specs
from bot.routing.config import catalog_of
from bot.settings import Config

DEFAULT = ModelSpec("", "openai", "gpt-4o-mini")
FAST = ModelSpec("fast", "openai", "gpt-4.1-mini")
SMART = ModelSpec("smart", "anthropic", "claude-sonnet-4-5")
DEEP = ModelSpec("deep", "openai", "o3", api="responses", allowed=("telegram:7",))
CATALOG = Catalog(DEFAULT, (FAST, SMART, DEEP), fallbacks=("smart", "fast"))


@pytest.mark.parametrize(("catalog", "chosen", "model", "why", "fallbacks"), [
    (CATALOG, None, "gpt-4o-mini", Why.DEFAULT, ["smart", "fast"]),
    (CATALOG, "deep", "o3", Why.CHOSEN, []),  # a person's choice never falls back ...
    (Catalog(DEFAULT, (FAST, SMART, DEEP), ("smart", "fast"), fallback_on_choice=True), "smart",
     "claude-sonnet-4-5", Why.CHOSEN, ["fast"]),  # ... unless fallback_on_choice; never to itself
    (CATALOG, "gone", "gpt-4o-mini", Why.DEFAULT, ["smart", "fast"]),  # a name no longer configured: no choice
    (Catalog(SMART, (FAST, SMART), ("smart", "fast")), None, "claude-sonnet-4-5", Why.DEFAULT, ["fast"]),
    (Catalog(DEFAULT), None, "gpt-4o-mini", Why.DEFAULT, []),
])
def test_the_model_of_a_conversation_and_its_fallbacks(catalog: Catalog, chosen: str | None, model: str, why: Why,
                                                      fallbacks: list[str]) -> None:
    primary, found_why, found = plan_specs(catalog, chosen)
    assert (primary.model, found_why, [s.name for s in found]) == (model, why, fallbacks)


@pytest.mark.parametrize(("error", "reason"), [
    (ProviderBusyError("429 after retries", status=429), "rate-limited right now"),
    (ProviderBusyError("Retry-After above the cap", status=429), "rate-limited right now"),
    (ProviderBusyError("529 overloaded", status=529), "overloaded right now"),
    (ProviderUnavailableError("503", status=503), "unavailable right now"),
    (ProviderUnavailableError("connection refused"), "unavailable right now"),
    (ProviderUnavailableError("timeout"), "unavailable right now"),
    (ProviderAuthError("401", status=401), None),
    (ProviderAuthError("403", status=403), None),
    (ContextTooLongError("too long", status=400), None),
    (ProviderRequestError("refused", status=400), None),
    (ProviderError("something else"), None),
])
def test_only_not_now_errors_fall_back(error: ProviderError, reason: str | None) -> None:
    assert fallback_reason(error) == reason


@pytest.mark.parametrize(("switch", "spec", "person", "owner", "allowed"), [
    ("owners", FAST, "telegram:1", True, True),
    ("owners", FAST, "telegram:2", False, False),
    ("everyone", FAST, "telegram:2", False, True),
    ("owners", DEEP, "telegram:7", False, True),  # a model's allowed opens it to its people ...
    ("everyone", DEEP, "telegram:2", False, False),  # ... and closes it to everyone else
    ("everyone", DEEP, "telegram:1", True, True),  # but owners
])
def test_who_may_pick_which_model(switch: str, spec: ModelSpec, person: str, owner: bool, allowed: bool) -> None:
    catalog = Catalog(DEFAULT, (FAST, SMART, DEEP), switch=switch)
    assert may_pick(catalog, spec, person, owner=owner) is allowed


def test_who_may_switch_at_all() -> None:
    assert [s.name for s in pickable(CATALOG, "telegram:7", owner=False)] == ["deep"]
    assert may_switch(CATALOG, "telegram:7", owner=False) and not may_switch(CATALOG, "telegram:2", owner=False)
    assert may_switch(Catalog(DEFAULT, switch="everyone"), "telegram:2", owner=False)


def test_button_ids_fit_every_platform_and_read_back() -> None:
    longest = "m" * 48
    assert len(json.dumps(choice_id(longest)).encode()) <= 64
    assert parse_choice(choice_id(longest)) == longest and parse_choice("model:default") == "default"
    assert [parse_choice(t) for t in ("model:", "model:../x", "model:a b", "ap:x:o", "model:fast ")] == [None] * 5


@pytest.mark.parametrize(("text", "title"), [
    ("Trip to Lisbon", "Trip to Lisbon"),
    ('"Planning a trip to Lisbon."\n', "Planning a trip to Lisbon"),
    ("Title: **Budget review**", "Budget review"),
    ("\n\n# Kubernetes networking\nmore lines", "Kubernetes networking"),
    ("   ", None),
    ("x" * 80, "x" * 59 + "…"),
])
def test_a_title_is_cleaned(text: str, title: str | None) -> None:
    assert clean_title(text) == title


def test_why_a_route_is_used_reads_well() -> None:
    def route(spec: ModelSpec, why: Why) -> Route:
        return Route(spec, provider=None, cost=lambda m, u: 0.0, why=why)  # type: ignore[arg-type]

    assert route(DEFAULT, Why.DEFAULT).why_text == "default"
    assert route(SMART, Why.CHOSEN).why_text == "chosen smart"
    first = fallback_to(route(SMART, Why.CHOSEN), route(FAST, Why.FALLBACK), "overloaded right now")
    assert first.why_text == "fallback fast for smart: overloaded right now"
    second = fallback_to(first, route(DEEP, Why.FALLBACK), "unavailable right now")
    assert second.why_text == "fallback deep for smart: overloaded right now"  # the first failure is what counts


def test_the_config_becomes_a_catalog() -> None:
    old = catalog_of(Config.model_validate({"agent": {"provider": "anthropic", "max_tokens": 2000}}))
    assert old.default == ModelSpec("", "anthropic", "claude-sonnet-4-5", "chat", 200_000, 2000)
    assert old.named == () and old.titles == "session" and old.switch == "owners"
    cfg = Config.model_validate({
        "agent": {"model": "fast", "fallbacks": ["deep"], "fallback_on_choice": True},
        "models": {"switch": "everyone", "titles": None,
                   "fast": {"provider": "openai", "model": "gpt-4.1-mini", "max_tokens": 1000,
                            "pricing": {"input": 0.4, "output": 1.6}},
                   "deep": {"provider": "openai", "model": "o3", "api": "responses", "reasoning_effort": "high",
                            "allowed": ["telegram:7"]}}})
    catalog = catalog_of(cfg)
    fast, deep = catalog.named
    assert catalog.default is fast and fast.price == Price(0.4, 1.6) and fast.max_tokens == 1000
    assert (deep.backend, deep.reasoning_effort, deep.context_window, deep.max_tokens) == (
        "openai-responses", "high", 200_000, 4096)
    assert (catalog.fallbacks, catalog.fallback_on_choice, catalog.switch, catalog.titles) == (
        ("deep",), True, "everyone", None)
    assert cfg.providers_in_use() == ("openai",)
