"""The core's ``pricing:`` and ``models:`` sections: prices per million tokens, and the named
models ``/model`` offers."""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from bot.config.types import Float, Int, Name, Section
from bot.errors import ConfigError
from bot.providers.context import context_window_for


class ModelPrice(Section):
    """USD per million tokens."""

    input: Annotated[Float, Field(ge=0)] = Field(description="USD per million input tokens (required)")
    output: Annotated[Float, Field(ge=0)] = Field(description="USD per million output tokens (required)")
    cache_read: Annotated[Float, Field(ge=0)] | None = Field(default=None, description="USD per million tokens read "
        "from the prompt cache")
    cache_write: Annotated[Float, Field(ge=0)] | None = Field(default=None, description="USD per million tokens "
        "written to the prompt cache")


_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,47}")  # fits a button id "model:<name>" (64 bytes)
RESERVED_MODEL_NAMES = ("default", "session")  # /model default; models.titles: session
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


def _person(value: Any) -> Any:
    if isinstance(value, str) and not re.match(r"^[a-z]+:.+$", value):
        raise PydanticCustomError("person", 'must be a person as "platform:user_id", such as "telegram:123"')
    return value


class NamedModelConfig(Section):
    """One entry of ``models``: a model of a configured provider, by the name ``/model`` shows."""

    provider: Literal["openai", "anthropic"] = Field(description="openai | anthropic: a configured provider")
    model: Name = Field(description="the provider's model id")
    api: Literal["chat", "responses"] = Field(default="chat", description="chat | responses (openai only: OpenAI's "
        "Responses API)")
    context_window: Annotated[Int, Field(ge=1)] | None = Field(default=None, description="null: the model's own "
        "window, from a table")
    max_tokens: Annotated[Int, Field(ge=1)] | None = Field(default=None, description="null: agent.max_tokens")
    pricing: ModelPrice | None = Field(default=None, description="USD per million tokens of this entry (else the "
        "table, pricing:)")
    reasoning_effort: Effort | None = Field(default=None, description="none | minimal | low | medium | high | xhigh "
        "(Anthropic: a thinking budget); null: the model's own")
    allowed: tuple[Annotated[str, AfterValidator(_person)], ...] | None = Field(default=None, description="who may "
        "pick it besides owners, as platform:user_id; left out: models.switch")

    @property
    def window(self) -> int:
        return context_window_for(self.model, self.context_window)


class ModelsConfig(Section):
    """``models``: named models (every key but ``switch`` and ``titles``), who may switch, titles."""

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra={
        "entries": "a name of your choice, shown by /model", "examples": [{
            "fast": {"provider": "openai", "model": "gpt-4.1-mini", "api": "chat", "context_window": None,
                     "max_tokens": None, "pricing": {"input": 0.15, "output": 0.6, "cache_read": None,
                                                     "cache_write": None},
                     "reasoning_effort": None, "allowed": ["telegram:123456789"]},
            "smart": {"provider": "anthropic", "model": "claude-sonnet-4-5"},
            "deep": {"provider": "openai", "api": "responses", "model": "o4-mini", "reasoning_effort": "high"}}]})
    __pydantic_extra__: dict[str, NamedModelConfig] = Field(init=False)

    switch: Literal["owners", "everyone"] = Field(default="owners", description="who may use /model <name>: owners "
        "| everyone")
    titles: Name | None = Field(default="session", description="the model that titles each session after its first "
        "exchange: session (the session's own), a name below, or null (no titles)")

    @model_validator(mode="before")
    @classmethod
    def _misspelt(cls, data: Any) -> Any:
        """``swich: everyone`` is a misspelt key, not a model entry."""
        for key, value in (data.items() if isinstance(data, dict) else ()):
            if key not in cls.model_fields and not isinstance(value, dict) and (
                    close := difflib.get_close_matches(str(key), list(cls.model_fields), n=1)):
                raise ConfigError(f"models.{key}", f'unknown key (did you mean "{close[0]}"?)')
        return data

    @model_validator(mode="after")
    def _names(self) -> ModelsConfig:
        for name, entry in self.entries().items():
            if not _MODEL_NAME.fullmatch(name) or name in RESERVED_MODEL_NAMES:
                raise ConfigError(f"models.{name}", "is not a usable model name",
                                  "up to 48 letters, digits, '.', '_' and '-', not default or session")
            if entry.api == "responses" and entry.provider != "openai":
                raise ConfigError(f"models.{name}.api", "responses is OpenAI's Responses API",
                                  "use it with provider: openai")
        return self

    def entries(self) -> dict[str, NamedModelConfig]:
        """The named models, in the file's order."""
        return dict(self.model_extra or {})
