"""The core's config sections and ``Config``; ``channels`` is built from the channel registry,
each platform bringing its own model (``ChannelSpec.config``).

Also the model introspection the loader and the error wording use: which model validates
a location, where the secrets are, and a location's dotted name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, Field, PrivateAttr, SecretStr, create_model, model_validator

from bot.channels import registry
from bot.config.types import Float, Int, Loc, Name, Secret, Section, ToolPattern, ToolRulesConfig, Url, secret
from bot.errors import ConfigError
from bot.providers.context import context_window_for

if TYPE_CHECKING:
    from bot.tools.sandbox import ExecSettings

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




def _channels_model() -> type[Section]:
    """``channels:``: one section per registered platform, each the platform's own model."""
    fields: dict[str, Any] = {spec.name: (spec.config, spec.config()) for spec in registry.specs()}
    return create_model("ChannelsConfig", __base__=Section, **fields)


ChannelsConfig = _channels_model()


class RetentionConfig(Section):
    # days a group message that did not address the bot is kept (text and all) after the
    # bot saw it; the context it gave is in memory only, so this is the audit trail
    context: Annotated[Float, Field(gt=0)] = 7.0


class StorageConfig(Section):
    path: Annotated[Path, BeforeValidator(lambda v: v or None)] = Path("data/chatgate.db")
    retention: RetentionConfig = RetentionConfig()


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
    """Per person (``platform:user_id``); owners are exempt."""

    messages_per_minute: Annotated[Int, Field(ge=1)] | None = 20
    daily_tokens: Annotated[Int, Field(ge=1)] | None = None
    daily_cost_usd: Annotated[Float, Field(gt=0)] | None = None
    max_tool_calls_per_step: Annotated[Int, Field(ge=1, le=256)] = 16


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


class ToolsConfig(ToolRulesConfig):
    """``allow``/``deny`` apply everywhere; a group's ``tools`` narrow them further."""

    owners_only: tuple[ToolPattern, ...] = ("exec",)  # offered only to the platform's owners
    exec: ExecToolConfig = ExecToolConfig()
    web_fetch: WebFetchConfig = WebFetchConfig()


class LoggingConfig(Section):
    level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        BeforeValidator(lambda v: v.upper() if isinstance(v, str) and v.upper() in _LEVELS else v),
    ] = "INFO"
    format: Literal["text"] = "text"  # the only format the CLI writes so far


class Config(Section):
    agent: AgentConfig = AgentConfig()
    providers: ProvidersConfig = ProvidersConfig()
    pricing: dict[Name, ModelPrice] = {}
    channels: ChannelsConfig = ChannelsConfig()
    storage: StorageConfig = StorageConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    runs: RunsConfig = RunsConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    limits: LimitsConfig = LimitsConfig()
    tools: ToolsConfig = ToolsConfig()
    logging: LoggingConfig = LoggingConfig()

    _source: str = PrivateAttr("built-in defaults")
    _source_path: Path | None = PrivateAttr(None)
    _env_sources: dict[Loc, tuple[str, ...]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _fits(self) -> Config:
        a = self.agent
        if a.max_tokens >= a.window:
            window = (f"agent.context_window ({a.window})" if a.context_window is not None
                      else f"the context window of {a.model} ({a.window}; set agent.context_window to change it)")
            raise ConfigError("agent.max_tokens", f"must be less than {window}, got {a.max_tokens}")
        return self

    def provider_settings(self) -> ProviderConfig:
        """The settings of the provider ``agent.provider`` selects."""
        return getattr(self.providers, self.agent.provider)

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
        the workspace root (a command gets its own workspace, nothing above it)."""
        paths = [self.storage.path.parent, self.workspace.root]
        if self._source_path is not None:
            paths.insert(0, self._source_path)
        return tuple(p.absolute() for p in paths)

    def exec_settings(self) -> ExecSettings:
        """``tools.exec`` as the exec tool takes it (``builtin_registry(exec_settings=...)``)."""
        from bot.tools.bounds import ExecLimits
        from bot.tools.sandbox import ExecSettings

        e = self.tools.exec
        return ExecSettings(sandbox=e.sandbox, network=e.network, owners_only=e.owners_only,
                            private=self.private_paths(), limits=ExecLimits(**e.limits.model_dump()))

    def owner_ids(self) -> tuple[str, ...]:
        """Every channel's owners as ``platform:user_id`` (``AgentSettings.owners``, the prompt)."""
        return tuple(f"{name}:{uid}" for name in ChannelsConfig.model_fields
                     for uid in getattr(getattr(self.channels, name), "owners", ()))

    def warnings(self) -> list[str]:
        """Choices that are allowed but unsafe, for ``chatgate check``."""
        found = []
        if self.tools.exec.enabled and self.tools.exec.sandbox == "none":
            found.append("tools.exec.sandbox is none: commands run unconfined and can read the bot's config "
                         "file, database, environment and every workspace (set it to bwrap)")
        for name in self.enabled_channels:  # each platform's own checks (token shapes, empty allowlists ...)
            check = registry.spec(name).check
            if check is not None:
                found += check(getattr(self.channels, name))
        return found

    @property
    def enabled_channels(self) -> tuple[str, ...]:
        return tuple(name for name in ChannelsConfig.model_fields if getattr(self.channels, name).enabled)

    def describe(self) -> str:
        """What would start, for ``chatgate check``; every secret is masked, and so are the
        credentials of URLs (``user:pass@``, token path segments, ``?token=``)."""
        from bot.tracing import mask_url

        a, p = self.agent, self.provider_settings()
        lines = [
            f"config     {self._source}",
            f"agent      {a.id}: up to {a.max_iterations} iterations, context window {a.window} "
            f"tokens, answers up to {a.max_tokens} tokens, dm_scope {a.dm_scope}"
            + (f", system_prompt {len(a.system_prompt)} chars" if a.system_prompt else ""),
            f"provider   {a.provider}, model {a.model}",
            f"           base_url {mask_url(p.base_url)}",
            f"           api_key {self._mask(('providers', a.provider, 'api_key'), p.api_key)}",
            f"           timeout {p.timeout:g}s, {p.max_retries} retries, Retry-After cap {p.retry_after_cap:g}s",
        ]
        channels = []
        for name in self.enabled_channels:
            channel = getattr(self.channels, name)
            details = []
            for field, value in channel:
                if field == "enabled":
                    continue
                loc = ("channels", name, field)
                shown = self._mask(loc, value) if loc in SECRETS else _shown(value, mask_url)
                details.append(f"{type(channel).model_fields[field].alias or field} {shown}")
            channels.append(f"{name} ({', '.join(details)})" if details else name)
        lines.append(f"channels   {'; '.join(channels) or '(none enabled)'}")
        if self.pricing:
            lines.append(f"pricing    overrides for {', '.join(self.pricing)}")
        lines += [
            f"storage    {self.storage.path}",
            f"workspace  {self.workspace.root}",
            f"runs       up to {self.runs.max_concurrent} at once, queue_mode {self.runs.queue_mode}",
            f"delivery   failed sends retried for {self.delivery.retry_for:g}s",
            f"logging    {self.logging.level}, {self.logging.format}",
        ]
        e = self.tools.exec
        if e.enabled:
            lines.insert(-1, f"tools      exec on: sandbox {e.sandbox}, network {'on' if e.network else 'off'}, "
                             f"{'owners only' if e.owners_only else 'every allowed user'}; limits "
                             f"{self.exec_settings().limits.describe()}")
        return "\n".join(lines)

    def _mask(self, loc: Loc, secret: SecretStr | None) -> str:
        if secret is None:
            return "(not set)"
        value = secret.get_secret_value()
        shown = f"{value[:3]}…{value[-4:]}" if len(value) >= 20 else "(set)"
        names = self._env_sources.get(loc)
        return f"{shown} from {', '.join(names)}" if names else shown


def _shown(value: Any, mask_url: Any) -> Any:
    """A channel setting as ``check`` prints it: URLs (also inside a section) masked."""
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    if isinstance(value, BaseModel):
        inner = ", ".join(f"{k} {_shown(v, mask_url)}" for k, v in value if not isinstance(v, SecretStr) and v is not None)
        return f"({inner})"
    return value


# ---------------------------------------------------------------- model introspection


def model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (a dict key counts as a step)."""
    model: type[BaseModel] = Config
    i = 0
    while i < len(loc):
        field = model.model_fields.get(loc[i]) if isinstance(loc[i], str) else None
        if field is None:
            return None
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model, i = annotation, i + 1
        elif get_origin(annotation) is dict and i + 1 < len(loc):
            value = get_args(annotation)[1]
            if not (isinstance(value, type) and issubclass(value, BaseModel)):
                return None
            model, i = value, i + 2
        else:
            return None
    return model


def _secret_fields(model: type[BaseModel] = Config, prefix: Loc = ()) -> Iterator[tuple[Loc, str]]:
    """Every secret field below ``model``: (location, environment variable)."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _secret_fields(annotation, (*prefix, name))
        elif isinstance(field.json_schema_extra, dict) and "env" in field.json_schema_extra:
            yield (*prefix, name), str(field.json_schema_extra["env"])


SECRETS: dict[Loc, str] = dict(_secret_fields())


def holds_secret(loc: Loc) -> bool:
    """True for a secret and for every section around one: their values are never echoed."""
    return any(secret[: len(loc)] == loc for secret in SECRETS)


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{part}" if out else str(part)
    return out
