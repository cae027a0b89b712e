"""The core's config sections and ``CoreConfig``, the file's model without the platforms.

``channels`` is an empty section here: each platform brings its own model
(``ChannelSpec.config``), and the composition root (``bot.settings.Config``) gives
``channels`` one section per registered channel. This package never imports the channel
registry (whose platform packages build their models on ``bot.config.types``).

Also the model introspection the loader and the error wording use, for a given model:
which model validates a location, where the secrets are, and a location's dotted name.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bot.config.dashboard import is_loopback, parse_bind  # noqa: F401 - where callers found them
from bot.config.keys import dotted, holds_secret, model_at, secrets  # noqa: F401 - the loader's and wording's
from bot.config.storage import ClusterConfig, RetentionConfig, StorageConfig  # noqa: F401
from bot.config.types import (
    DEFAULT_DOWNLOAD_MB,
    OFF_IS_FALSE,
    AccessConfig,
    ChannelConfig,
    ChannelSection,
    Float,
    Int,
    Loc,
    Name,
    Secret,
    Section,
    ToolPattern,
    ToolRulesConfig,
    Url,
    secret,
)
from bot.errors import ConfigError
from bot.providers.context import context_window_for

S = TypeVar("S", bound=Section)

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}

_secret = secret



def _flush_mode(value: Any) -> Any:
    # `memory_flush: true` means the default places (DMs), `false` means never
    if value is True:
        return "dm"
    if value is False:
        return "off"
    return value


class CompactionConfig(Section):
    """When and how a long session is summarised (bot.agent.compaction)."""

    enabled: bool = True
    trigger_ratio: Annotated[Float, Field(gt=0, lt=1)] = 0.75  # of the context window
    trigger_messages: Annotated[Int, Field(ge=2)] = 50  # messages since the last summary
    keep_last: Annotated[Int, Field(ge=0, le=100)] = 4  # newest messages never summarised
    summary_max_tokens: Annotated[Int, Field(ge=64, le=32_768)] = 1024
    # before summarising, let the model write durable facts to memory/YYYY-MM-DD.md:
    # off | dm (DM workspaces only) | all (group workspaces too); true = dm, false = off
    memory_flush: Annotated[Literal["off", "dm", "all"], BeforeValidator(_flush_mode)] = "dm"


class AgentConfig(Section):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")] = "main"
    provider: Literal["openai", "anthropic"] = "openai"
    model: Name = DEFAULT_MODELS["openai"]
    max_iterations: Annotated[Int, Field(ge=1, le=200)] = 20
    context_window: Annotated[Int, Field(ge=1)] | None = None  # None: the model's, from a table
    max_message_chars: Annotated[Int, Field(ge=1)] = 32_768
    max_tokens: Annotated[Int, Field(ge=1)] = 4096
    system_prompt: str | None = None
    dm_scope: Literal["per-user", "linked"] = "per-user"
    identity_links: dict[Name, tuple[Annotated[str, Field(pattern=r"^[a-z]+:.+$")], ...]] = {}
    history_turns: Annotated[Int, Field(ge=1, le=10_000)] = 40
    input_guard: Literal["off", "log", "warn", "block"] = "warn"
    compaction: CompactionConfig = CompactionConfig()
    fallbacks: tuple[Name, ...] = ()  # names in models, tried in order when the model is busy or down
    fallback_on_choice: bool = False  # a model picked with /model falls back too
    usage_footer: Annotated[Literal["off", "tokens", "cost"], OFF_IS_FALSE] = "off"  # a line under each answer

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
    timeout: Annotated[Float, Field(gt=0)] = 120.0
    max_retries: Annotated[Int, Field(ge=0, le=10)] = 3
    retry_after_cap: Annotated[Float, Field(ge=0)] = 60.0


class OpenAIConfig(ProviderConfig):
    api_key: Secret = _secret("OPENAI_API_KEY")
    base_url: Url = "https://api.openai.com/v1"


class AnthropicConfig(ProviderConfig):
    api_key: Secret = _secret("ANTHROPIC_API_KEY")
    base_url: Url = "https://api.anthropic.com"


class ProvidersConfig(Section):
    openai: OpenAIConfig = OpenAIConfig()
    anthropic: AnthropicConfig = AnthropicConfig()


class ModelPrice(Section):
    """USD per million tokens."""

    input: Annotated[Float, Field(ge=0)]
    output: Annotated[Float, Field(ge=0)]
    cache_read: Annotated[Float, Field(ge=0)] | None = None
    cache_write: Annotated[Float, Field(ge=0)] | None = None


_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,47}")  # fits a button id "model:<name>" (64 bytes)
RESERVED_MODEL_NAMES = ("default", "session")  # /model default; models.titles: session
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


def _person(value: Any) -> Any:
    if isinstance(value, str) and not re.match(r"^[a-z]+:.+$", value):
        raise PydanticCustomError("person", 'must be a person as "platform:user_id", such as "telegram:123"')
    return value


class NamedModelConfig(Section):
    """One entry of ``models``: a model of a configured provider, by the name ``/model`` shows."""

    provider: Literal["openai", "anthropic"]
    model: Name
    api: Literal["chat", "responses"] = "chat"  # responses: OpenAI's Responses API
    context_window: Annotated[Int, Field(ge=1)] | None = None  # None: the model's, from a table
    max_tokens: Annotated[Int, Field(ge=1)] | None = None  # None: agent.max_tokens
    pricing: ModelPrice | None = None  # USD per million tokens of this entry (else the table, pricing:)
    reasoning_effort: Effort | None = None  # None: the model's own
    allowed: tuple[Annotated[str, AfterValidator(_person)], ...] | None = None  # who may pick it (and owners)

    @property
    def window(self) -> int:
        return context_window_for(self.model, self.context_window)


class ModelsConfig(Section):
    """``models``: named models (every key but ``switch`` and ``titles``), who may switch, titles."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, NamedModelConfig] = Field(init=False)

    switch: Literal["owners", "everyone"] = "owners"  # who may use /model <name> (a model's allowed adds people)
    titles: Name | None = "session"  # the named model that titles sessions; session: the session's own; null: off

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


class WorkspaceConfig(Section):
    root: Annotated[Path, BeforeValidator(lambda v: v or None)] = Path("workspaces")
    templates: Path | None = None  # None: the templates that ship with chatgate
    group_scope: Literal["per-group", "per-user"] = "per-group"


class RunsConfig(Section):
    max_concurrent: Annotated[Int, Field(ge=1)] = 16
    max_per_group: Annotated[Int, Field(ge=1)] = 3
    queue_mode: Literal["collect", "followup", "interrupt"] = "collect"
    debounce_ms: Annotated[Int, Field(ge=0, le=60_000)] = 500
    max_queued: Annotated[Int, Field(ge=1, le=1000)] = 20
    recover_max_age: Annotated[Float, Field(ge=0)] = 600.0  # seconds


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class LimitsConfig(Section):
    """Per person (``platform:user_id``), and the whole bot's daily budget; owners are exempt."""

    messages_per_minute: Annotated[Int, Field(ge=1)] | None = 20
    daily_tokens: Annotated[Int, Field(ge=1)] | None = None
    daily_cost_usd: Annotated[Float, Field(gt=0)] | None = None
    audio_minutes_per_day: Annotated[Float, Field(gt=0)] | None = None  # voice notes and audio transcribed
    max_tool_calls_per_step: Annotated[Int, Field(ge=1, le=256)] = 16
    bot_daily_tokens: Annotated[Int, Field(ge=1)] | None = None  # the whole bot's, everyone's charges together
    bot_daily_cost_usd: Annotated[Float, Field(gt=0)] | None = None
    alert_at: Annotated[Float, Field(gt=0, le=1)] | None = None  # owners told daily past this share of a budget


class DeliveryConfig(Section):
    retry_for: Annotated[Float, Field(gt=0)] = 600.0  # seconds a failed send is retried before it is given up


class ExecLimitsConfig(Section):
    """What one command may take (``bot.tools.bounds``); null leaves a bound off."""

    processes: Annotated[Int, Field(ge=8)] | None = 256  # processes and threads at once
    memory_mb: Annotated[Int, Field(ge=64)] | None = 1024  # the command's processes together
    file_size_mb: Annotated[Int, Field(ge=1)] | None = 512  # the largest file it may write
    tmp_mb: Annotated[Int, Field(ge=1)] | None = 256  # the sandbox's /tmp (a tmpfs, so memory)
    cgroup: bool = True  # a cgroup per command when the bot may make one; else rlimits only


class ExecToolConfig(Section):
    enabled: bool = False  # the shell tool: off unless you trust every allowed user with a shell
    sandbox: Literal["bwrap", "none"] = "bwrap"  # none: the command can read what the bot can
    network: bool = False  # only under bwrap
    owners_only: bool = True  # only the channels' owners may have commands run
    limits: ExecLimitsConfig = ExecLimitsConfig()


class WebFetchConfig(Section):
    enabled: bool = False  # the web_fetch tool: fetches public http(s) pages as text
    allow_private: bool = False  # also private, loopback, link-local and metadata addresses (SSRF!)
    max_bytes: Annotated[Int, Field(ge=1024, le=50_000_000)] = 2_000_000  # of the response body
    timeout: Annotated[Float, Field(gt=0, le=300)] = 20.0  # seconds for the whole fetch, redirects included
    max_chars: Annotated[Int, Field(ge=500, le=200_000)] = 20_000  # of the text given to the model


def _approver(value: Any) -> Any:
    if isinstance(value, str) and value not in ("requester", "owners") and not re.match(r"^[a-z]+:.+$", value):
        raise ValueError("must be requester, owners, or a person as platform:user_id")
    return value


class ToolsConfig(ToolRulesConfig):
    """``allow``/``deny`` apply everywhere; a group's ``tools`` narrow them further."""

    owners_only: tuple[ToolPattern, ...] = ("exec",)  # offered only to the platform's owners
    # tool name or glob -> ask | never; written rules bind owners too (defaults: exec and mcp__* ask non-owners)
    approval: dict[ToolPattern, Literal["ask", "never"]] = {}
    approvers: tuple[Annotated[str, AfterValidator(_approver)], ...] = ("requester", "owners")
    approval_timeout: Annotated[Float, Field(gt=0, le=86_400)] = 300.0  # seconds; then the call is denied
    # hours an "Allow for this session" lasts (it ends with the session too: /new)
    approval_session_hours: Annotated[Float, Field(gt=0, le=720)] = 8.0
    allow_always: bool = False  # offer "Always allow" (remembered per person and exact call)
    exec: ExecToolConfig = ExecToolConfig()
    web_fetch: WebFetchConfig = WebFetchConfig()


class PreToolHookConfig(Section):
    run: Annotated[str, Field(min_length=1)]  # a shell command, run like exec, the call as JSON on stdin
    tools: tuple[ToolPattern, ...] = ("*",)
    timeout: Annotated[Float, Field(gt=0, le=600)] = 10.0


class HooksConfig(Section):
    pre_tool: tuple[PreToolHookConfig, ...] = ()  # exit 0 lets a call through; else its first line refuses it


class LoggingConfig(Section):
    level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        BeforeValidator(lambda v: v.upper() if isinstance(v, str) and v.upper() in _LEVELS else v),
    ] = "INFO"
    format: Literal["text", "json"] = "text"  # json: one object per line (bot.logs)


class SkillsConfig(Section):
    """Agent Skills (``bot.skills``): folders with a SKILL.md, listed in the prompt, read with read_skill."""

    paths: tuple[Path, ...] | None = None  # shared skill folders; None: skills/ in the data directory
    in_workspaces: bool = True  # also each workspace's own skills/ (in a group, only owners change it)
    inline_max: Annotated[Int, Field(ge=0, le=100)] = 15  # listed in the prompt up to this many; more: skill_search


class CoreConfig(Section):
    """The config file's model but for the platforms' sections (see the module doc)."""

    agent: AgentConfig = AgentConfig()
    providers: ProvidersConfig = ProvidersConfig()
    pricing: dict[Name, ModelPrice] = {}
    models: ModelsConfig = ModelsConfig()
    channels: Section = Section()  # one section per registered channel in bot.settings.Config
    storage: StorageConfig = StorageConfig()
    cluster: ClusterConfig = ClusterConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    runs: RunsConfig = RunsConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    limits: LimitsConfig = LimitsConfig()
    tools: ToolsConfig = ToolsConfig()
    hooks: HooksConfig = HooksConfig()
    skills: SkillsConfig = SkillsConfig()
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
    def _skills_outside_workspaces(self) -> CoreConfig:
        root = Path(os.path.realpath(self.workspace.root))  # a link into a workspace is inside it
        for i, folder in enumerate(self.skill_folders()):
            if root in Path(os.path.realpath(folder)).parents or Path(os.path.realpath(folder)) == root:
                key = f"skills.paths[{i}]" if self.skills.paths is not None else "skills.paths"
                raise ConfigError(key, f"{folder} is inside workspace.root, where the bot's file tools could change "
                                       "shared skills; put them elsewhere (a workspace's own go in its skills/)")
        return self

    def skill_folders(self) -> tuple[Path, ...]:
        """The shared skill folders: ``skills.paths``, else ``skills/`` in the data directory (the
        folder of ``storage.path``)."""
        if self.skills.paths is not None:
            return self.skills.paths
        return (self.storage.path.parent / "skills",)

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
        id of ``agent.provider``: the old form)."""
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
        """What a sandboxed command must never see: this config file, the database's folder, the
        workspace root (a command gets its own workspace, nothing above it) and what the
        capabilities' sections name (the dashboard's TLS certificate and key: ``bot.settings``)."""
        paths = [self.storage.path.parent, self.workspace.root, *self._own_private_paths()]
        if self._source_path is not None:
            paths.insert(0, self._source_path)
        return tuple(p.absolute() for p in paths)

    def _own_private_paths(self) -> tuple[Path, ...]:
        return ()

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

    def max_download_bytes(self, channel: str) -> int:
        """The largest file fetched from a message on ``channel`` (the default for a channel
        without the key: the terminal, a test's)."""
        section = self.channel_sections().get(channel)
        if isinstance(section, ChannelConfig):
            return section.max_download_bytes
        return int(DEFAULT_DOWNLOAD_MB * 1024 * 1024)

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
