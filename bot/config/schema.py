"""The core's config sections and ``CoreConfig``, the file's model without the platforms' and
the capabilities' sections: ``bot.settings.Config`` adds them (the package doc says why there)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    PrivateAttr,
    SecretStr,
    model_validator,
)

from bot.config.named import ModelPrice, ModelsConfig, NamedModelConfig
from bot.config.storage import ClusterConfig, StorageConfig
from bot.config.tools import ToolsConfig
from bot.config.types import (
    OFF_IS_FALSE,
    AccessConfig,
    CapabilitySection,
    ChannelConfig,
    ChannelSection,
    Float,
    Int,
    Loc,
    Name,
    Secret,
    Section,
    Url,
    secret,
)
from bot.errors import ConfigError
from bot.providers.context import context_window_for

S = TypeVar("S", bound=Section)

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


class CompactionConfig(Section):
    """When and how a long session is summarised (bot.agent.compaction)."""

    enabled: bool = Field(default=True, description="false: never summarised; the oldest messages drop out instead")
    trigger_ratio: Annotated[Float, Field(gt=0, lt=1)] = Field(default=0.75, description="compact when a prompt "
        "passes this share of the context window")
    trigger_messages: Annotated[Int, Field(ge=2)] = Field(default=50, description="... or when the session holds "
        "more live messages than this")
    keep_last: Annotated[Int, Field(ge=0, le=100)] = Field(default=4, description="newest messages never summarised")
    summary_max_tokens: Annotated[Int, Field(ge=64, le=32_768)] = Field(default=1024, description="length cap of a "
        "summary")
    memory_flush: Annotated[Literal["off", "dm", "all"], OFF_IS_FALSE,
                            BeforeValidator(lambda v: "dm" if v is True else v)] = Field(
        default="dm", description="before summarising, let the model save lasting facts to memory/YYYY-MM-DD.md: "
        "off | dm (DM workspaces) | all (groups too); true means dm, false off")


class AgentConfig(Section):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")] = Field(default="main", description="names "
        "this agent in session keys; letters, digits, . _ -")
    provider: Literal["openai", "anthropic"] = Field(default="openai", description="openai | anthropic")
    model: Name = Field(default=DEFAULT_MODELS["openai"], description="a model id of `provider` (default "
        "gpt-4o-mini for openai, claude-sonnet-4-5 for anthropic), or the name of an entry in models: below (then "
        "that entry says provider and all)")
    max_iterations: Annotated[Int, Field(ge=1, le=200)] = Field(default=20, description="tool-loop steps per run, "
        "1..200")
    context_window: Annotated[Int, Field(ge=1)] | None = Field(default=None, description="tokens the model accepts "
        "(prompt + answer); null: the model's own (gpt-4o 128000, gpt-4.1 1047576, gpt-5 400000, o3 200000, Claude "
        "200000; unknown models 128000). Set it for a local model.")
    max_message_chars: Annotated[Int, Field(ge=1)] = Field(default=32_768, description="longer inbound messages are "
        "cut to this many characters")
    max_tokens: Annotated[Int, Field(ge=1)] = Field(default=4096, description="cap on one answer, in tokens; below "
        "context_window")
    system_prompt: str | None = Field(default=None, description="optional extra instructions, added to the built-in "
        "prompt")
    dm_scope: Literal["per-user", "linked"] = Field(default="per-user", description="per-user: one DM session per "
        "platform account | linked: the accounts in identity_links share one DM session")
    identity_links: dict[Name, tuple[Annotated[str, Field(pattern=r"^[a-z]+:.+$")], ...]] = Field(
        default={}, description="person -> their accounts (as platform:user_id)",
        examples=[{"alice": ["telegram:123456", "discord:987654321"]}])
    history_turns: Annotated[Int, Field(ge=1, le=10_000)] = Field(default=40, description="past user turns (with "
        "their tool steps) sent to the model")
    input_guard: Literal["off", "log", "warn", "block"] = Field(default="warn", description="prompt-injection check "
        "on user messages: off | log | warn (log a warning) | block (refuse politely; in groups, context lines that "
        "hit are left out)")
    compaction: CompactionConfig = Field(default=CompactionConfig(), description="long conversations: older "
        "messages become a summary")
    fallbacks: tuple[Name, ...] = Field(default=(), description="names in models:, tried in order when the model is "
        "busy or down (429 past the retries or a long Retry-After, 529, 5xx, timeouts), only before any tool ran or "
        "any text was shown; e.g. [fast]")
    fallback_on_choice: bool = Field(default=False, description="a model someone picked with /model falls back too")
    usage_footer: Annotated[Literal["off", "tokens", "cost"], OFF_IS_FALSE] = Field(default="off", description="a "
        "short line under each answer: off | tokens (in and out) | cost (tokens and USD, by the price table and "
        "pricing:)")

    @model_validator(mode="before")
    @classmethod
    def _model_follows_provider(cls, data: Any) -> Any:
        if isinstance(data, dict) and "model" not in data and data.get("provider") in DEFAULT_MODELS:
            return {**data, "model": DEFAULT_MODELS[data["provider"]]}
        return data

    @property
    def window(self) -> int:
        """The context window in use: ``context_window`` when set, else the model's."""
        return context_window_for(self.model, self.context_window)


class ProviderConfig(Section):
    """``base_url`` goes to the SDK as written: OpenAI's includes ``/v1``, Anthropic's is the root."""

    api_key: Secret = None
    base_url: Url = "http://localhost"
    timeout: Annotated[Float, Field(gt=0)] = Field(default=120.0, description="seconds per request")
    max_retries: Annotated[Int, Field(ge=0, le=10)] = Field(default=3, description="on 429/5xx/connection errors, "
        "0..10")
    retry_after_cap: Annotated[Float, Field(ge=0)] = Field(default=60.0, description="give up rather than wait "
        "longer than this many seconds")


class OpenAIConfig(ProviderConfig):
    api_key: Secret = secret("OPENAI_API_KEY", description="required when agent.provider is openai")
    base_url: Url = Field(default="https://api.openai.com/v1", description="the API root, /v1 included")


class AnthropicConfig(ProviderConfig):
    api_key: Secret = secret("ANTHROPIC_API_KEY", description="required when agent.provider is anthropic")
    base_url: Url = Field(default="https://api.anthropic.com", description="the server root, without /v1")


class ProvidersConfig(Section):
    openai: OpenAIConfig = OpenAIConfig()
    anthropic: AnthropicConfig = AnthropicConfig()


class WorkspaceConfig(Section):
    root: Annotated[Path, BeforeValidator(lambda v: v or None)] = Field(default=Path("workspaces"), description="one "
        "directory per user below this: {platform}-{user_id}/ for DMs, {platform}-group-{chat_id}/ for groups")
    templates: Path | None = Field(default=None, description="seed files for new workspaces; null = the ones "
        "shipped in workspaces/templates/ (AGENTS.md, SOUL.md, USER.md, ...)")
    group_scope: Literal["per-group", "per-user"] = Field(default="per-group", description="per-group: one "
        "workspace and one conversation per group chat | per-user: each member gets their own workspace "
        "({platform}-group-{chat_id}-user-{user_id}/) and their own conversation in each group; members never see "
        "each other's files")


class RunsConfig(Section):
    max_concurrent: Annotated[Int, Field(ge=1)] = Field(default=16, description="runs at once across all sessions, "
        ">= 1; more wait as queued")
    max_per_group: Annotated[Int, Field(ge=1)] = Field(default=3, description="runs at once in one group chat (its "
        "threads and topics)")
    queue_mode: Literal["collect", "followup", "interrupt"] = Field(default="collect", description="a message that "
        "arrives during a run in the same session: collect (batch into one run after it) | followup (run after, one "
        "by one) | interrupt (stop the run, start a new one)")
    debounce_ms: Annotated[Int, Field(ge=0, le=60_000)] = Field(default=500, description="a queued run starts after "
        "this much quiet")
    max_queued: Annotated[Int, Field(ge=1, le=1000)] = Field(default=20, description="per session; beyond it the "
        "sender is told \"not queued\"")
    recover_max_age: Annotated[Float, Field(ge=0)] = Field(default=600.0, description="seconds: after a crash, "
        "unanswered messages younger than this are answered, older ones get a \"please resend\" note")


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class LimitsConfig(Section):
    """Per person (``platform:user_id``), and the whole bot's daily budget; owners are exempt."""

    messages_per_minute: Annotated[Int, Field(ge=1)] | None = Field(default=20, description="a token bucket: up to "
        "this many at once, refilled over a minute; null for no rate limit")
    daily_tokens: Annotated[Int, Field(ge=1)] | None = Field(default=None, description="tokens (in + out) per "
        "person per UTC day, e.g. 200000; null: none")
    daily_cost_usd: Annotated[Float, Field(gt=0)] | None = Field(default=None, description="USD per person per UTC "
        "day, e.g. 0.50; null: none")
    audio_minutes_per_day: Annotated[Float, Field(gt=0)] | None = Field(default=None, description="minutes of voice "
        "notes and audio transcribed per person per UTC day, e.g. 30; over it the person is told, nothing is "
        "transcribed")
    max_tool_calls_per_step: Annotated[Int, Field(ge=1, le=256)] = Field(default=16, description="tool calls the "
        "model may make in one step; the rest get an error")
    bot_daily_tokens: Annotated[Int, Field(ge=1)] | None = Field(default=None, description="the whole bot's tokens "
        "per UTC day (everyone's together, owners' included), e.g. 5000000; null: none")
    bot_daily_cost_usd: Annotated[Float, Field(gt=0)] | None = Field(default=None, description="the whole bot's USD "
        "per UTC day, e.g. 20.00; null: none. Once spent, new runs are refused (owners aside) with one sentence, "
        "told to each person once that day, until 00:00 UTC")
    alert_at: Annotated[Float, Field(gt=0, le=1)] | None = Field(default=None, description="e.g. 0.8: tell the "
        "owners (a DM on each platform) when a person passes 80 % of daily_tokens or daily_cost_usd, or the whole "
        "bot 80 % of bot_daily_tokens or bot_daily_cost_usd; once per person (and for the bot) and UTC day, "
        "remembered in the database (restarts, instances)")


class DeliveryConfig(Section):
    retry_for: Annotated[Float, Field(gt=0)] = Field(default=600.0, description="seconds a failed send (outage, "
        "5xx, flood wait) is retried, with backoff and the platform's retry_after, before the answer is given up "
        "(logged). After an outage the first send that goes through wakes every waiting chat. Answers are stored "
        "before they are sent: after a restart the parts not yet delivered are sent first, never regenerated.")


class LoggingConfig(Section):
    level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        BeforeValidator(lambda v: v.upper() if isinstance(v, str) and v.upper() in _LEVELS else v),
    ] = Field(default="INFO", description="DEBUG | INFO | WARNING | ERROR")
    format: Literal["text", "json"] = Field(default="text", description="text | json: one JSON object per line "
        "(time, level, logger, message, run, session, instance), for log shippers")


class CoreConfig(Section):
    """The config file's model but for the platforms' and the capabilities' sections."""

    agent: AgentConfig = AgentConfig()
    providers: ProvidersConfig = Field(default=ProvidersConfig(), description="base_url is used exactly as "
        "written. OpenAI's includes /v1, so an OpenAI-compatible server is e.g. vLLM http://host:8000/v1 "
        "or Ollama http://localhost:11434/v1; such servers still need some key: any non-empty value works "
        "(OPENAI_API_KEY=local). Anthropic's base_url is the root, without /v1.")
    pricing: dict[Name, ModelPrice] = Field(default={}, description="USD per million tokens; overrides the built-in "
        "price table for the models named here", examples=[{"my-local-model": {"input": 0.0, "output": 0.0}}])
    models: ModelsConfig = Field(default=ModelsConfig(), description="named models: what /model offers, each under "
        "a name of your choice")
    channels: Section = Section()  # one section per registered channel in bot.settings.Config
    storage: StorageConfig = StorageConfig()
    cluster: ClusterConfig = Field(default=ClusterConfig(), description="several instances on one PostgreSQL "
        "database (storage.url)")
    workspace: WorkspaceConfig = WorkspaceConfig()
    runs: RunsConfig = RunsConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    limits: LimitsConfig = Field(default=LimitsConfig(), description="per person (platform:user_id); the platforms' "
        "owners are exempt. Over a limit the message is stored, the model is not called, and the person is told "
        "once (per minute, or per day for a budget). Every model call counts as it is made: stopped and interrupted "
        "runs, compactions and sub-agents included; a batch of messages answered at once is split among its "
        "senders.")
    tools: ToolsConfig = ToolsConfig()
    logging: LoggingConfig = LoggingConfig()

    _source: str = PrivateAttr("built-in defaults")
    _source_path: Path | None = PrivateAttr(None)
    _env_sources: dict[Loc, tuple[str, ...]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _fits(self) -> CoreConfig:
        a = self.agent
        if self.default_entry() is None and a.max_tokens >= a.window:
            window = (f"agent.context_window ({a.window})" if a.context_window is not None
                      else f"the context window of {a.model} ({a.window}; set agent.context_window to change it)")
            raise ConfigError("agent.max_tokens", f"must be less than {window}, got {a.max_tokens}")
        for name, entry in self.models.entries().items():
            cap = entry.max_tokens or a.max_tokens
            if cap >= entry.window:
                key = f"models.{name}.max_tokens" if entry.max_tokens else "agent.max_tokens"
                raise ConfigError(key, f"must be less than the context window of {name} ({entry.window}; set "
                                       f"models.{name}.context_window to change it), got {cap}")
        return self

    @model_validator(mode="after")
    def _across_sections(self) -> CoreConfig:
        """The capabilities' rules across sections (``CapabilitySection.check``), in the file's order."""
        for name in type(self).model_fields:
            if isinstance(section := getattr(self, name), CapabilitySection):
                section.check(self)
        return self

    @model_validator(mode="after")
    def _model_names(self) -> CoreConfig:
        """``agent.fallbacks`` and ``models.titles`` name entries of ``models``."""
        names = list(self.models.entries())
        named = [(f"agent.fallbacks[{i}]", name) for i, name in enumerate(self.agent.fallbacks)]
        if self.models.titles not in (None, "session"):
            named.append(("models.titles", str(self.models.titles)))
        for key, name in named:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                raise ConfigError(key, f'"{name}" is not a model in models' + (f' (did you mean "{close[0]}"?)'
                                                                            if close else ""),
                                  f"name one of: {', '.join(names)}" if names and not close
                                  else None if names else "add it under models:")
        return self

    def default_entry(self) -> NamedModelConfig | None:
        """The entry of ``models`` that ``agent.model`` names, if it names one (else it is a model
        id of ``agent.provider``)."""
        return self.models.entries().get(self.agent.model)

    def providers_in_use(self) -> tuple[str, ...]:
        """The providers the default model and the named models need (their keys must be set)."""
        entry = self.default_entry()
        used = [entry.provider if entry else self.agent.provider]
        used += [e.provider for e in self.models.entries().values()]
        return tuple(dict.fromkeys(used))

    def provider_settings(self) -> ProviderConfig:
        """The settings of the default model's provider (``agent.provider``, or its entry's)."""
        entry = self.default_entry()
        return getattr(self.providers, entry.provider if entry else self.agent.provider)

    def section_secrets(self) -> tuple[tuple[str, ...], ...]:
        """The keys that must be set of the sections composed beside the core's (``bot.settings``)."""
        return ()

    def secret_values(self) -> tuple[str, ...]:
        """Every secret that is set, for scrubbing logs and traces."""
        found: list[str] = []

        def walk(model: BaseModel) -> None:
            for name in type(model).model_fields:
                value = getattr(model, name)
                if isinstance(value, SecretStr):
                    found.append(value.get_secret_value())
                elif isinstance(value, BaseModel):
                    walk(value)

        walk(self)
        return tuple(v for v in found if v)

    def private_paths(self) -> tuple[Path, ...]:
        """What a sandboxed command must never see: this config file, the database's folder and
        the workspace root (a command gets its own workspace, nothing above it); ``bot.settings``
        adds what the capabilities' sections name (the dashboard's TLS certificate and key)."""
        paths = [self.storage.path.parent, self.workspace.root]
        if self._source_path is not None:
            paths.insert(0, self._source_path)
        return tuple(p.absolute() for p in paths)

    def section(self, name: str, model: type[S]) -> S:
        """A capability's own section at the dotted key ``name`` (``mcp``, ``tools.browser``;
        ``bot.settings.Config`` adds one per registered capability); its package names its model."""
        found: Any = self
        for part in name.split("."):
            found = getattr(found, part, None)
        if not isinstance(found, model):
            raise LookupError(f"no config section {name!r} of type {model.__name__} (is its capability registered?)")
        return found

    def channel_sections(self) -> dict[str, ChannelSection]:
        """``channels.<name>`` by name, every registered channel's, enabled or not."""
        return {name: section for name, section in self.channels if isinstance(section, ChannelSection)}

    def owner_ids(self) -> tuple[str, ...]:
        """Every channel's owners as ``platform:user_id`` (``AgentSettings.owners``, the prompt)."""
        return tuple(f"{name}:{uid}" for name, section in self.channel_sections().items()
                     if isinstance(section, AccessConfig) for uid in section.owners)

    def max_download_bytes(self) -> dict[str, int]:
        """The largest file fetched from a message, by channel; a channel without the key (the
        terminal) gets the intake's default, which is the key's (20 MB)."""
        return {name: section.max_download_bytes for name, section in self.channel_sections().items()
                if isinstance(section, ChannelConfig)}

    def warnings(self) -> list[str]:
        """Choices that are allowed but unsafe, for ``chatgate check``."""
        found = []
        names = list(self.models.entries())
        close = difflib.get_close_matches(self.agent.model, names, 1) if self.default_entry() is None else []
        if close:
            found.append(f'agent.model "{self.agent.model}" is not a name in models, so it is used as a model id of '
                         f'{self.agent.provider} (did you mean "{close[0]}"?)')
        if self.tools.exec.enabled and self.tools.exec.sandbox == "none":
            found.append("tools.exec.sandbox is none: commands run unconfined and can read the bot's config "
                         "file, database, environment and every workspace (set it to bwrap)")
        return found

    @property
    def enabled_channels(self) -> tuple[str, ...]:
        return tuple(name for name, section in self.channel_sections().items() if section.enabled)

    def _mask(self, loc: Loc, secret: SecretStr | None) -> str:
        """A secret as ``chatgate check`` shows it: at most its ends, and where it came from."""
        if secret is None:
            return "(not set)"
        value = secret.get_secret_value()
        shown = f"{value[:3]}…{value[-4:]}" if len(value) >= 20 else "(set)"
        names = self._env_sources.get(loc)
        return f"{shown} from {', '.join(names)}" if names else shown
