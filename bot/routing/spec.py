"""The nouns of model choice: a model as configured (``ModelSpec``), all of them (``Catalog``),
and the model one run calls (``Route``), with what it may fall back to (``Plan``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from bot.llm import Message
from bot.providers.base import ChatRequest, Provider, ToolSpec, Usage
from bot.providers.pricing import Price

Cost = Callable[[str, Usage], float]  # (the model id the server named, usage) -> USD


class Why(StrEnum):
    """Why a run uses its model."""

    DEFAULT = "default"  # nobody chose one for the conversation
    CHOSEN = "chosen"  # picked with /model
    FALLBACK = "fallback"  # the model it should have used was busy or down


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model as configured: an entry of ``models``, or ``agent.provider`` + ``agent.model``
    (then ``name`` is "")."""

    name: str
    provider: str  # a providers.<name> section: openai | anthropic
    model: str  # the id the provider knows
    api: str = "chat"  # chat | responses (OpenAI's Responses API)
    context_window: int = 128_000
    max_tokens: int = 4096
    reasoning_effort: str | None = None
    price: Price | None = None  # its own price; None: the price table (and pricing:)
    allowed: tuple[str, ...] | None = None  # who may pick it ("platform:user_id"), besides owners

    @property
    def label(self) -> str:
        """How people see it: its name, else its model id."""
        return self.name or self.model

    @property
    def backend(self) -> str:
        """The provider registry's name for it (``bot.providers.make_provider``)."""
        return self.provider if self.api == "chat" else f"{self.provider}-{self.api}"


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every model of the installation and the rules around them (``models``, ``agent.fallbacks``)."""

    default: ModelSpec
    named: tuple[ModelSpec, ...] = ()
    fallbacks: tuple[str, ...] = ()
    fallback_on_choice: bool = False
    switch: str = "owners"  # owners | everyone
    titles: str | None = "session"  # a name in named; session: the session's own model; None: off

    def get(self, name: str | None) -> ModelSpec | None:
        return next((spec for spec in self.named if spec.name == name), None) if name else None


@dataclass(frozen=True, slots=True)
class Route:
    """The model a run calls, ready: its spec, its provider, its price, and why it is the one."""

    spec: ModelSpec
    provider: Provider
    cost: Cost
    why: Why = Why.DEFAULT
    instead_of: str = ""  # a fallback: the label of the model it answers for
    reason: str = ""  # a fallback: why that one did not ("overloaded right now")

    def request(self, system: str, messages: tuple[Message, ...], tools: tuple[ToolSpec, ...],
                volatile: str = "") -> ChatRequest:
        s = self.spec
        return ChatRequest(s.model, system, messages, tools, s.max_tokens, volatile=volatile,
                           reasoning_effort=s.reasoning_effort)

    @property
    def why_text(self) -> str:
        """For traces and /status: "default", "chosen smart", "fallback fast for smart: overloaded right now"."""
        text = f"{self.why.value} {self.spec.name}" if self.spec.name else self.why.value
        return f"{text} for {self.instead_of}: {self.reason}" if self.why is Why.FALLBACK else text


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run starts on, and the routes it may fall back to, in order."""

    route: Route
    fallbacks: tuple[Route, ...] = ()


def model_line(route: Route) -> str:
    """``/status``'s and ``/model``'s words for a conversation's model and why it is that one."""
    spec = route.spec
    name = f"{spec.name} ({spec.model})" if spec.name else spec.model
    return f"{name}, picked with /model" if route.why is Why.CHOSEN else f"{name}, the default"
