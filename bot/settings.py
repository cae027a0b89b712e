"""This installation's config: the core's sections, one per registered channel and one per
capability that has one (``mcp:``, ``tools.browser:`` ...).

    config = load_config("config.yaml")     # a Config: validated, frozen, secrets checked
    config.channel_sections()["telegram"]   # each platform's own model (ChannelSpec.config)

Part of the composition root, with ``cli`` and ``app``: where ``bot.config`` meets the channel
and capability registries and the tools (``exec_settings``), none of which it imports, so that
the port, the capability packages and the config never import each other.

Importing this module imports every registered platform package (its config model, never
its SDK: ``ChannelSpec.build`` imports that) and every capability's spec module (its section
and tables, never what it runs: ``CapabilitySpec.open`` imports that).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, SecretStr, create_model

from bot.capabilities import registry as capabilities
from bot.channels import registry
from bot.config import CapabilitySection, Section
from bot.config.keys import secrets
from bot.config.loading import load
from bot.config.schema import CoreConfig
from bot.tracing import mask_url

if TYPE_CHECKING:
    from bot.tools.sandbox import ExecSettings

__all__ = ["ChannelsConfig", "Config", "load_config"]


if TYPE_CHECKING:
    # Its fields are the registered channels, known only at run time: a type checker sees a
    # Section, and code reads a platform's section by name (Config.channel_sections()).
    ChannelsConfig = Section
else:
    # ``channels:``: one section per registered platform, each the platform's own model.
    ChannelsConfig = create_model("ChannelsConfig", __base__=Section,
                                  **{spec.name: (spec.config, spec.config()) for spec in registry.specs()})


class _Config(CoreConfig):
    """The config file's model but for the capabilities' sections (``Config`` adds them)."""

    channels: ChannelsConfig = Field(default=ChannelsConfig(), description="who may talk to the bot is set per "
        "platform with the same keys: dm_policy, allow_from, group_policy, the allowed groups, require_mention, "
        "owners")

    def capability_sections(self) -> dict[str, CapabilitySection]:
        """Each registered capability's section that has one, by the capability's name."""
        return {spec.name: self.section(spec.section_key, CapabilitySection)
                for spec in capabilities.specs() if spec.config is not None}

    def private_paths(self) -> tuple[Path, ...]:
        """The core's, then what the capabilities' sections name."""
        own = (p.absolute() for section in self.capability_sections().values() for p in section.private_paths())
        return (*super().private_paths(), *own)

    def section_secrets(self) -> tuple[tuple[str, ...], ...]:
        """The capabilities' keys that must be set (``chatgate run`` stops without them)."""
        return tuple(key for section in self.capability_sections().values() for key in section.required_secrets())

    def secret_values(self) -> tuple[str, ...]:
        """Every secret that is set, the capabilities' own (the MCP servers' ``env`` ...) too."""
        return (*super().secret_values(),
                *(v for section in self.capability_sections().values() for v in section.secret_values()))

    def warnings(self) -> list[str]:
        """Choices that are allowed but unsafe, each enabled platform's own checks (token
        shapes, empty allowlists ...) and each capability's, for ``chatgate check``."""
        found = super().warnings()
        for name, channel in self.channel_sections().items():
            if channel.enabled and (check := registry.spec(name).check) is not None:
                found += check(channel)
        for section in self.capability_sections().values():
            found += section.warnings()
        return found

    def exec_settings(self) -> ExecSettings:
        """``tools.exec`` as the exec tool takes it (``builtin_registry(exec_settings=...)``)."""
        from bot.tools.sandbox import ExecSettings

        e = self.tools.exec
        return ExecSettings(sandbox=e.sandbox, network=e.network, owners_only=e.owners_only,
                            private=self.private_paths(), limits=e.limits)

    def describe(self) -> str:
        """What would start, for ``chatgate check``; every secret is masked, and so are the
        credentials of URLs (``user:pass@``, token path segments, ``?token=``)."""
        known = secrets(type(self))
        a, p = self.agent, self.provider_settings()
        entry = self.default_entry()
        provider, model = (entry.provider, f"{a.model} ({entry.model})") if entry else (a.provider, a.model)
        lines = [
            f"config     {self._source}",
            f"agent      {a.id}: up to {a.max_iterations} iterations, context window "
            f"{entry.window if entry else a.window} tokens, answers up to "
            f"{(entry.max_tokens if entry else None) or a.max_tokens} tokens, dm_scope {a.dm_scope}"
            + (f", system_prompt {len(a.system_prompt)} chars" if a.system_prompt else ""),
            f"provider   {provider}, model {model}",
            f"           base_url {mask_url(p.base_url)}",
            f"           api_key {self._mask(('providers', provider, 'api_key'), p.api_key)}",
            f"           timeout {p.timeout:g}s, {p.max_retries} retries, Retry-After cap {p.retry_after_cap:g}s",
        ]
        channels = []
        for name, channel in self.channel_sections().items():
            if not channel.enabled:
                continue
            details = []
            for field, value in channel:
                if field == "enabled":
                    continue
                loc = ("channels", name, field)
                shown = self._mask(loc, value) if loc in known else _shown(value)
                details.append(f"{type(channel).model_fields[field].alias or field} {shown}")
            channels.append(f"{name} ({', '.join(details)})" if details else name)
        lines.append(f"channels   {'; '.join(channels) or '(none enabled)'}")
        if self.pricing:
            lines.append(f"pricing    overrides for {', '.join(self.pricing)}")
        if entries := self.models.entries():
            named = ", ".join(f"{name} ({e.provider}{' responses' if e.api == 'responses' else ''} {e.model})"
                              for name, e in entries.items())
            lines.append(f"models     {named}; /model: {self.models.switch}"
                         + (f"; fallbacks {', '.join(a.fallbacks)}" if a.fallbacks else ""))
            lines += [f"           providers.{name}.api_key {self._mask(('providers', name, 'api_key'), key)}"
                      for name in self.providers_in_use() if name != provider
                      for key in [getattr(self.providers, name).api_key]]
        titles = {None: "off", "session": "by each session's own model"}.get(self.models.titles)
        lines.append(f"titles     {titles or f'by {self.models.titles}'}")
        lines += [
            f"storage    {self.storage.shown}",
            f"workspace  {self.workspace.root}",
            f"runs       up to {self.runs.max_concurrent} at once, queue_mode {self.runs.queue_mode}",
            f"delivery   failed sends retried for {self.delivery.retry_for:g}s",
        ]
        lines += [line for section in self.capability_sections().values() for line in section.describe()]
        e = self.tools.exec
        if e.enabled:
            from bot.tools.bounds import describe_limits

            lines.append(f"tools      exec on: sandbox {e.sandbox}, network {'on' if e.network else 'off'}, "
                         f"{'owners only' if e.owners_only else 'every allowed user'}; limits "
                         f"{describe_limits(e.limits)}")
        lines.append(f"logging    {self.logging.level}, {self.logging.format}")
        return "\n".join(lines)


def _shown(value: Any) -> Any:
    """A channel setting as ``check`` prints it: URLs (also inside a section) masked."""
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    if isinstance(value, BaseModel):
        inner = ", ".join(f"{k} {_shown(v)}" for k, v in value
                          if not isinstance(v, SecretStr) and v is not None)
        return f"({inner})"
    return value


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None, *,
                require_secrets: bool = True) -> Config:
    """Read, expand and validate the config file (``bot.config.loading``); raise ``ConfigError``
    (one line) on the first mistake.

    ``require_secrets=False`` is for commands that only read the store (``chatgate traces``)."""
    return load(Config, path, env, require_secrets=require_secrets)


def _config_model() -> type[_Config]:
    """``_Config`` and each registered capability's section (``CapabilitySpec.config``) at its key:
    a field of the file's model (``mcp``), or of a core section's (``tools.browser``), which is
    then a subclass of the core's model with that field added."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for spec in capabilities.specs():
        if spec.config is None:
            continue
        parent, _, name = spec.section_key.rpartition(".")
        if not parent:
            top[name] = (spec.config, spec.config())
        elif "." in parent or parent not in CoreConfig.model_fields:
            raise TypeError(f"{spec.name}: its config key {spec.section_key} is not under a core section")
        else:
            nested.setdefault(parent, {})[name] = (spec.config, spec.config())
    for parent, fields in nested.items():
        base = CoreConfig.model_fields[parent].annotation
        assert isinstance(base, type) and issubclass(base, Section)
        model = create_model(base.__name__, __base__=base, **fields)
        top[parent] = (model, model())
    return create_model("Config", __base__=_Config, **top)


if TYPE_CHECKING:
    # The capabilities' fields are known only at run time: a type checker sees _Config, and a
    # capability reads its own section by name (``config.section("mcp", McpConfig)``).
    Config = _Config
else:
    Config = _config_model()
