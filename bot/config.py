"""One YAML file -> typed, validated, frozen config, checked before anything starts.

``load_config(path)`` reads the file, expands ``${VAR}`` / ``${VAR:-default}`` from the
environment in string values of the parsed tree (``$${`` is a literal ``${``), fills each
secret that the file leaves out from its environment variable, and validates the result
into the models below. Every mistake raises ``ConfigError`` as one line naming the dotted
key and the fix; only the first mistake is reported.

Without a path, ``./config.yaml`` is used if present, else the built-in defaults plus
``OPENAI_API_KEY``/``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``,
``CHATGATE_PROVIDER`` and ``CHATGATE_MODEL``.

``base_url`` values go to the SDKs exactly as written: OpenAI's includes ``/v1`` (vLLM
``http://host:8000/v1``, Ollama ``http://localhost:11434/v1``; such servers still need some
key, and any non-empty value works, e.g. ``OPENAI_API_KEY=local``); Anthropic's is the root.

Secrets are ``SecretStr``: their repr is masked, ``describe()`` shows at most the ends.
``load_config`` insists on the secrets that will be used; a ``Config`` built in code (tests)
does not. This module imports only pydantic and PyYAML; it runs at every start.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    field_validator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bot.errors import ConfigError

if TYPE_CHECKING:
    from bot.tools.sandbox import ExecSettings

DEFAULT_PATH = Path("config.yaml")
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
_PROVIDER_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

Loc = tuple[str | int, ...]


# ---------------------------------------------------------------------------- types


def _no_bool(kind: str) -> BeforeValidator:
    # YAML reads `yes`/`true` as a bool, which pydantic would quietly turn into 1.
    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(kind, "not a number")
        return value

    return BeforeValidator(check)


def _secret_text(value: Any) -> Any:
    # Keys pasted from files often end in a newline; only blank means "not set".
    if isinstance(value, str):
        return value.strip() or None
    return value


def _check_url(value: str) -> str:
    if not re.match(r"https?://[^/\s]+", value):
        raise PydanticCustomError("url", "not an http(s) URL")
    return value  # passed to the SDK exactly as written


Int = Annotated[int, _no_bool("int_type")]
Float = Annotated[float, _no_bool("float_type")]
Secret = Annotated[SecretStr | None, BeforeValidator(_secret_text)]
Name = Annotated[str, Field(min_length=1)]
Url = Annotated[str, AfterValidator(_check_url)]


def _secret(env: str) -> Any:
    """A secret field; when the file leaves it out (or null) it is read from ``env``."""
    return Field(default=None, json_schema_extra={"env": env})


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_default(cls, data: Any) -> Any:
        # `telegram:` with nothing under it is an empty section, not an error.
        return {} if data is None else data


# --------------------------------------------------------------------------- models


class AgentConfig(_Section):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")] = "main"
    provider: Literal["openai", "anthropic"] = "openai"
    model: Name = DEFAULT_MODELS["openai"]
    max_iterations: Annotated[Int, Field(ge=1, le=200)] = 20
    context_window: Annotated[Int, Field(ge=1)] = 128_000
    max_message_chars: Annotated[Int, Field(ge=1)] = 32_768
    max_tokens: Annotated[Int, Field(ge=1)] = 4096
    system_prompt: str | None = None
    dm_scope: Literal["per-user", "linked"] = "per-user"
    identity_links: dict[Name, tuple[Annotated[str, Field(pattern=r"^[a-z]+:.+$")], ...]] = {}
    history_turns: Annotated[Int, Field(ge=1, le=10_000)] = 40
    input_guard: Literal["off", "log", "warn", "block"] = "warn"

    @model_validator(mode="before")
    @classmethod
    def _model_follows_provider(cls, data: Any) -> Any:
        if isinstance(data, dict) and "model" not in data and data.get("provider") in DEFAULT_MODELS:
            return {**data, "model": DEFAULT_MODELS[data["provider"]]}
        return data


class ProviderConfig(_Section):
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


class ProvidersConfig(_Section):
    openai: OpenAIConfig = OpenAIConfig()
    anthropic: AnthropicConfig = AnthropicConfig()


class ModelPrice(_Section):
    """USD per million tokens."""

    input: Annotated[Float, Field(ge=0)]
    output: Annotated[Float, Field(ge=0)]
    cache_read: Annotated[Float, Field(ge=0)] | None = None
    cache_write: Annotated[Float, Field(ge=0)] | None = None


class ConsoleChannel(_Section):
    enabled: bool = True


PlatformId = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v)]


class AccessConfig(_Section):
    """Who may talk to the bot on one platform (DESIGN section 5)."""

    dm_policy: Literal["allowlist", "pairing", "open", "disabled"] = "allowlist"
    allow_from: tuple[PlatformId, ...] = ()  # user ids allowed to DM; members of an allowed group need not be listed
    group_policy: Literal["allowlist", "open", "disabled"] = "allowlist"
    groups: tuple[PlatformId, ...] = ()  # chat ids of allowed groups; "*" allows every group
    require_mention: bool = True
    owners: tuple[PlatformId, ...] = ()  # user ids allowed admin commands (/stopall)

    # The platform's own rule for user ids, so that an entry that can never match (a
    # username where an id is needed) stops start-up instead of silently locking people out.
    # A channel's config model overrides these two; the default takes any non-empty id.
    user_id_pattern: ClassVar[str] = r".+"
    user_id_hint: ClassVar[str] = "a user id"

    @field_validator("allow_from", "owners")
    @classmethod
    def _user_ids_can_match(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        for value in ids:
            if not re.fullmatch(cls.user_id_pattern, value):
                raise PydanticCustomError("user_id", "{value} can never match: {hint}",
                                          {"value": json.dumps(value, ensure_ascii=False), "hint": cls.user_id_hint})
        return ids


class ChannelConfig(AccessConfig):
    """The base of every platform's ``channels.<name>`` model: access keys plus ``enabled``."""

    enabled: bool = False


secret = _secret  # for channel config models: a secret field read from an env variable when left out


def _https_url(value: str | None) -> str | None:
    if value is not None and not re.match(r"https://[^/\s]+", value):
        raise PydanticCustomError("https_url", "must be an https:// URL (Telegram only posts to https)")
    return value


def _webhook_secret(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", value.get_secret_value()):
        raise PydanticCustomError("webhook_secret", "Telegram accepts only 1 to 256 of A-Z, a-z, 0-9, _ and -")
    return value


class TelegramWebhook(_Section):
    listen: str = "0.0.0.0"
    port: Annotated[Int, Field(ge=1, le=65535)] = 8443
    path: str = "/telegram"
    # the public https URL Telegram posts to, e.g. https://bot.example.com/telegram
    url: Annotated[str | None, AfterValidator(_https_url)] = None
    secret_token: Annotated[Secret, AfterValidator(_webhook_secret)] = _secret("TELEGRAM_WEBHOOK_SECRET")


class TelegramChannel(AccessConfig):
    user_id_pattern: ClassVar[str] = r"[1-9][0-9]{0,15}"
    user_id_hint: ClassVar[str] = "Telegram user ids are numbers such as 123456789 (ask @userinfobot), not @usernames"

    enabled: bool = False
    token: Secret = _secret("TELEGRAM_BOT_TOKEN")
    base_url: Url = "https://api.telegram.org"  # the Bot API server root; /bot<token> is derived
    mode: Literal["polling", "webhook"] = "polling"
    webhook: TelegramWebhook = TelegramWebhook()
    streaming: Literal["off", "edit"] = "off"
    max_download_mb: Annotated[Float, Field(gt=0, le=2000)] = 20.0


class DiscordChannel(AccessConfig):
    user_id_pattern: ClassVar[str] = r"[0-9]{15,21}"
    user_id_hint: ClassVar[str] = ("Discord user ids are numbers such as 80351110224678912 "
                                   "(Developer Mode, then Copy User ID), not names")

    enabled: bool = False
    token: Secret = _secret("DISCORD_BOT_TOKEN")


class SlackChannel(AccessConfig):
    user_id_pattern: ClassVar[str] = r"[UW][A-Z0-9]{2,20}"
    user_id_hint: ClassVar[str] = "Slack user ids look like U012AB3CD (profile, then Copy member ID), not @names"

    enabled: bool = False
    bot_token: Secret = _secret("SLACK_BOT_TOKEN")
    app_token: Secret = _secret("SLACK_APP_TOKEN")


class ChannelsConfig(_Section):
    """One model per platform; each must have ``enabled``."""

    console: ConsoleChannel = ConsoleChannel()
    telegram: TelegramChannel = TelegramChannel()
    discord: DiscordChannel = DiscordChannel()
    slack: SlackChannel = SlackChannel()


class StorageConfig(_Section):
    path: Annotated[Path, BeforeValidator(lambda v: v or None)] = Path("data/chatgate.db")


class WorkspaceConfig(_Section):
    root: Annotated[Path, BeforeValidator(lambda v: v or None)] = Path("workspaces")
    templates: Path | None = None  # None: the templates that ship with chatgate
    group_scope: Literal["per-group", "per-user"] = "per-group"


class RunsConfig(_Section):
    max_concurrent: Annotated[Int, Field(ge=1)] = 16
    max_per_group: Annotated[Int, Field(ge=1)] = 3
    queue_mode: Literal["collect", "followup", "interrupt"] = "collect"
    debounce_ms: Annotated[Int, Field(ge=0, le=60_000)] = 500
    max_queued: Annotated[Int, Field(ge=1, le=1000)] = 20
    recover_max_age: Annotated[Float, Field(ge=0)] = 600.0  # seconds


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class ExecToolConfig(_Section):
    enabled: bool = False  # the shell tool: off unless you trust every allowed user with a shell
    sandbox: Literal["bwrap", "none"] = "bwrap"  # none: the command can read what the bot can
    network: bool = False  # only under bwrap
    owners_only: bool = True  # only the channels' owners may have commands run


class ToolsConfig(_Section):
    exec: ExecToolConfig = ExecToolConfig()


class LoggingConfig(_Section):
    level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        BeforeValidator(lambda v: v.upper() if isinstance(v, str) and v.upper() in _LEVELS else v),
    ] = "INFO"
    format: Literal["text"] = "text"  # the only format the CLI writes so far


class Config(_Section):
    agent: AgentConfig = AgentConfig()
    providers: ProvidersConfig = ProvidersConfig()
    pricing: dict[Name, ModelPrice] = {}
    channels: ChannelsConfig = ChannelsConfig()
    storage: StorageConfig = StorageConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    runs: RunsConfig = RunsConfig()
    tools: ToolsConfig = ToolsConfig()
    logging: LoggingConfig = LoggingConfig()

    _source: str = PrivateAttr("built-in defaults")
    _source_path: Path | None = PrivateAttr(None)
    _env_sources: dict[Loc, tuple[str, ...]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _fits(self) -> Config:
        if self.agent.max_tokens >= self.agent.context_window:
            raise ConfigError(
                "agent.max_tokens",
                f"must be less than agent.context_window ({self.agent.context_window}), "
                f"got {self.agent.max_tokens}",
            )
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
        from bot.tools.sandbox import ExecSettings

        e = self.tools.exec
        return ExecSettings(sandbox=e.sandbox, network=e.network, owners_only=e.owners_only,
                            private=self.private_paths())

    def owner_ids(self) -> tuple[str, ...]:
        """Every channel's owners as ``platform:user_id`` (``AgentSettings.owners``, the prompt)."""
        return tuple(f"{name}:{uid}" for name in ChannelsConfig.model_fields
                     for uid in getattr(getattr(self.channels, name), "owners", ()))

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
            f"agent      {a.id}: up to {a.max_iterations} iterations, context window {a.context_window} "
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
                shown = self._mask(loc, value) if loc in _SECRETS else _shown(value, mask_url)
                details.append(f"{field} {shown}")
            channels.append(f"{name} ({', '.join(details)})" if details else name)
        lines.append(f"channels   {'; '.join(channels) or '(none enabled)'}")
        if self.pricing:
            lines.append(f"pricing    overrides for {', '.join(self.pricing)}")
        lines += [
            f"storage    {self.storage.path}",
            f"workspace  {self.workspace.root}",
            f"runs       up to {self.runs.max_concurrent} at once, queue_mode {self.runs.queue_mode}",
            f"logging    {self.logging.level}, {self.logging.format}",
        ]
        e = self.tools.exec
        if e.enabled:
            lines.insert(-1, f"tools      exec on: sandbox {e.sandbox}, network {'on' if e.network else 'off'}, "
                             f"{'owners only' if e.owners_only else 'every allowed user'}")
        return "\n".join(lines)

    def warnings(self) -> list[str]:
        """Choices that are allowed but unsafe, for ``chatgate check``."""
        found = []
        if self.tools.exec.enabled and self.tools.exec.sandbox == "none":
            found.append("tools.exec.sandbox is none: commands run unconfined and can read the bot's config "
                         "file, database, environment and every workspace (set it to bwrap)")
        return found

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


def _model_at(loc: Loc) -> type[BaseModel] | None:
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


_SECRETS: dict[Loc, str] = dict(_secret_fields())


def _holds_secret(loc: Loc) -> bool:
    """True for a secret and for every section around one: their values are never echoed."""
    return any(secret[: len(loc)] == loc for secret in _SECRETS)


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{part}" if out else str(part)
    return out


# -------------------------------------------------------------------- env expansion

_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_REF_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.S)


def _expand(node: Any, env: Mapping[str, str], loc: Loc, used: dict[Loc, tuple[str, ...]]) -> Any:
    """Expand references in every string value (never in keys); note which variables fed which key."""
    if isinstance(node, dict):
        return {k: _expand(v, env, (*loc, k), used) for k, v in node.items()}
    if isinstance(node, list):
        return [_expand(v, env, (*loc, i), used) for i, v in enumerate(node)]
    if not isinstance(node, str) or "${" not in node:
        return node
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$${":
            return "${"
        body = _REF_BODY.fullmatch(m.group(1) or "")
        if m.group(1) is None or body is None:
            shown = "" if _holds_secret(loc) else f" {_got(m.group(0))}"
            raise ConfigError(dotted(loc), f"bad variable reference{shown}",
                              "write ${NAME} or ${NAME:-default}; $${ for a literal ${")
        names.append(body.group(1))
        return env.get(body.group(1)) or (body.group(2) or "")

    out = _REF.sub(sub, node)
    if names:
        used[loc] = tuple(names)
    return out


def _fill_secrets(tree: dict[str, Any], env: Mapping[str, str], used: dict[Loc, tuple[str, ...]]) -> None:
    """Each secret the file leaves out (or null) is read from its environment variable."""
    for loc, var in _SECRETS.items():
        node: Any = tree
        for part in loc[:-1]:
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                break  # validation reports the wrong type
        else:
            if node.get(loc[-1]) is None:
                node[loc[-1]] = env.get(var, "")
                used[loc] = (var,)


# ----------------------------------------------------------------------- YAML


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise _DuplicateKey(
                        None, None,
                        f'duplicate key "{key_node.value}" (first at line {seen[key] + 1})',
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path, shown: str) -> Any:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(shown, "file not found", "check the path, or copy config.example.yaml there") from None
    except IsADirectoryError:
        raise ConfigError(shown, "is a directory", "give the path of a YAML file") from None
    except PermissionError:
        raise ConfigError(shown, "cannot be read (permission denied)", "check the file's owner and mode") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(shown, f"is not UTF-8 text (byte {exc.start})", "save it as UTF-8") from None
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        if isinstance(exc, _DuplicateKey):
            fix = "remove one of them"
        elif isinstance(exc, yaml.constructor.ConstructorError):
            fix = "remove the tag; plain YAML only"
        else:
            fix = "check the indentation, and quote values that contain ': ', ' #' or start with a special character"
        problem = " ".join(str(exc.problem or exc.context or "not valid YAML").split())
        raise ConfigError(shown, f"YAML error{where}: {problem}", fix) from None
    except yaml.YAMLError as exc:
        raise ConfigError(shown, f"YAML error: {str(exc).splitlines()[0]}") from None


# ------------------------------------------------------------------ error wording


def _got(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    text = str(value)  # JSON quoting keeps a newline in the value from breaking the one line
    return json.dumps(text if len(text) <= 40 else text[:37] + "...", ensure_ascii=False)


_PHRASES = {
    "int_type": "expected an integer", "int_parsing": "expected an integer",
    "int_from_float": "expected an integer", "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false", "bool_parsing": "expected true or false",
    "string_type": "expected a string", "model_type": "expected a mapping (indented key: value lines)",
    "model_attributes_type": "expected a mapping (indented key: value lines)",
    "dict_type": "expected a mapping (indented key: value lines)", "list_type": "expected a list",
    "tuple_type": "expected a list", "path_type": "expected a path", "url": "expected an http:// or https:// URL",
}


def _phrase(err: Mapping[str, Any], secret: bool) -> tuple[str, str | None]:
    """(problem, fix) for one pydantic error; never pydantic's own wording when we know better."""
    kind, ctx, loc = err["type"], err.get("ctx") or {}, err["loc"]
    got = "" if secret else f", got {_got(err['input'])}"
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = list(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        if close:
            return f'unknown key (did you mean "{close[0]}"?)', None
        return "unknown key", (f"allowed: {', '.join(allowed)}" if allowed else "remove it")
    if kind == "invalid_key" or (loc[-1:] == ("[key]",) and kind == "string_type"):
        return f"keys must be text, got {_got(err['input'])}", "quote it"
    if kind == "missing":
        return "missing", "add this key"
    if kind == "literal_error":
        choices = ", ".join(re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        return f"must be one of {choices}{got}", None
    bounds = {"greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt"),
              "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}
    if kind in bounds:
        word, key = bounds[kind]
        return f"must be {word} {ctx.get(key)}{got}", None
    if kind == "string_too_short":
        return "must not be empty", None
    if kind == "string_pattern_mismatch":
        if loc[:2] == ("agent", "identity_links"):
            return f'expected "platform:user_id" such as "telegram:123"{got}', None
        return f"may contain only letters, digits, '.', '_' and '-'{got}", None
    if kind in ("user_id", "webhook_secret", "https_url"):
        return str(err["msg"]), None  # the message names the value itself (never a secret's)
    if kind in _PHRASES:
        return _PHRASES[kind] + got, None
    return str(err["msg"]).splitlines()[0] + got, None


def _from_validation(exc: ValidationError, env_sources: Mapping[Loc, tuple[str, ...]]) -> ConfigError:
    err = exc.errors(include_url=False)[0]
    loc: Loc = tuple(err["loc"])
    if loc[-1:] == ("[key]",):  # the key itself is wrong: name it as a key, not an index
        loc = (*loc[:-2], str(loc[-2]))
    elif err["type"] == "invalid_key":
        loc = (*loc[:-1], str(loc[-1]))
    problem, fix = _phrase(err, secret=_holds_secret(loc))
    names = env_sources.get(loc)
    if names and fix is None:
        fix = f"check {' and '.join(names)}"
    return ConfigError(dotted(loc), problem, fix)


# -------------------------------------------------------------------------- load


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None, *,
                require_secrets: bool = True) -> Config:
    """Read, expand and validate the config; raise ``ConfigError`` (one line) on the first mistake.

    ``require_secrets=False`` is for commands that only read the store (``chatgate traces``)."""
    env = os.environ if env is None else env
    used: dict[Loc, tuple[str, ...]] = {}
    from_file = path is not None or DEFAULT_PATH.is_file()
    if from_file:
        shown = str(DEFAULT_PATH if path is None else path)
        raw = _read_yaml(Path(shown), shown)
        if raw is None:  # an empty file: all defaults
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(shown, f"expected a mapping of sections (agent:, providers:, ...), got {_got(raw)}")
        tree, source = _expand(raw, env, (), used), shown
    else:
        tree, source = _tree_from_env(env, used), "built-in defaults and environment (no config.yaml)"
    _fill_secrets(tree, env, used)
    try:
        config = Config.model_validate(tree)
    except ValidationError as exc:
        raise _from_validation(exc, used) from None
    config._source = source
    config._source_path = Path(source) if from_file else None
    if config.storage.path.is_dir():
        raise ConfigError("storage.path", f"{config.storage.path} is a directory",
                          "give the path of the database file inside it, e.g. data/chatgate.db")
    config._env_sources = used
    if require_secrets:
        _require_secrets(config, used, from_file)
    return config


def _tree_from_env(env: Mapping[str, str], used: dict[Loc, tuple[str, ...]]) -> dict[str, Any]:
    def get(name: str) -> str:
        return (env.get(name) or "").strip()

    provider = get("CHATGATE_PROVIDER")
    if provider:
        used[("agent", "provider")] = ("CHATGATE_PROVIDER",)
    else:
        provider = "anthropic" if get("ANTHROPIC_API_KEY") and not get("OPENAI_API_KEY") else "openai"
    agent: dict[str, Any] = {"provider": provider}
    if get("CHATGATE_MODEL"):
        agent["model"] = get("CHATGATE_MODEL")
        used[("agent", "model")] = ("CHATGATE_MODEL",)
    providers: dict[str, Any] = {"openai": {}, "anthropic": {}}
    for name in providers:
        var = f"{name.upper()}_BASE_URL"
        if get(var):
            providers[name]["base_url"] = get(var)
            used[("providers", name, "base_url")] = (var,)
    return {"agent": agent, "providers": providers}


def _require_secrets(config: Config, used: Mapping[Loc, tuple[str, ...]], from_file: bool) -> None:
    """The selected provider's key and the tokens of enabled channels must be set."""
    wanted = [loc for loc in _SECRETS if loc[:2] == ("providers", config.agent.provider)]
    wanted += [loc for loc in _SECRETS if loc[0] == "channels" and loc[1] in config.enabled_channels]
    telegram = config.channels.telegram
    if telegram.mode != "webhook":
        wanted = [loc for loc in wanted if loc[:3] != ("channels", "telegram", "webhook")]
    elif telegram.enabled and not telegram.webhook.url:
        raise ConfigError("channels.telegram.webhook.url", "missing",
                          "webhook mode needs the public https URL Telegram posts updates to")
    for loc in wanted:
        node: Any = config
        for part in loc:
            node = getattr(node, part)
        if node is not None:
            continue
        var, names = _SECRETS[loc], used.get(loc)
        if not from_file:
            chosen = ("agent", "provider") in used  # CHATGATE_PROVIDER named it
            other = "" if chosen or var != "OPENAI_API_KEY" else ", or ANTHROPIC_API_KEY for Anthropic"
            fix = f"set {var}{other}, or write config.yaml"
        elif names:
            fix = f"set {' and '.join(names)}"
        else:
            fix = f"write it here, or ${{{var}}} and set {var}"
        raise ConfigError(dotted(loc), "missing", fix)
