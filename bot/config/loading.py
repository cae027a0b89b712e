"""Loading: one YAML file (or the environment alone) -> expanded -> validated config, into the
file's whole model, which ``bot.settings.load_config`` passes (its ``Config`` knows the platforms).

``${VAR}`` and ``${VAR:-default}`` are expanded in string values of the parsed tree
(``$${`` is a literal ``${``); each secret the file leaves out is read from its
environment variable; duplicate keys and YAML tags are errors. The variables come from the
environment and, under it, from the ``.env`` file beside the config file (``bot.config.dotenv``;
the working directory's without one): a variable set in the environment wins.

Without a path, ``./config.yaml`` is used if present, else the built-in defaults plus
``OPENAI_API_KEY``/``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``,
``CHATGATE_PROVIDER`` and ``CHATGATE_MODEL``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from bot.config import dotenv
from bot.config.keys import dotted, holds_secret, secrets
from bot.config.schema import CoreConfig
from bot.config.types import Loc
from bot.config.wording import describe_value, from_validation
from bot.errors import ConfigError

DEFAULT_PATH = Path("config.yaml")
C = TypeVar("C", bound=CoreConfig)

# -------------------------------------------------------------------- env expansion

_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_REF_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.S)


def _expand(node: Any, env: Mapping[str, str], loc: Loc, used: dict[Loc, tuple[str, ...]],
            model: type[BaseModel]) -> Any:
    """Expand references in every string value (never in keys); note which variables fed which key."""
    if isinstance(node, dict):
        return {k: _expand(v, env, (*loc, k), used, model) for k, v in node.items()}
    if isinstance(node, list):
        return [_expand(v, env, (*loc, i), used, model) for i, v in enumerate(node)]
    if not isinstance(node, str) or "${" not in node:
        return node
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$${":
            return "${"
        body = _REF_BODY.fullmatch(m.group(1) or "")
        if m.group(1) is None or body is None:
            shown = "" if holds_secret(loc, model) else f" {describe_value(m.group(0))}"
            raise ConfigError(dotted(loc), f"bad variable reference{shown}",
                              "write ${NAME} or ${NAME:-default}; $${ for a literal ${")
        names.append(body.group(1))
        return env.get(body.group(1)) or (body.group(2) or "")

    out = _REF.sub(sub, node)
    if names:
        used[loc] = tuple(names)
    return out


def _fill_secrets(tree: dict[str, Any], env: Mapping[str, str], used: dict[Loc, tuple[str, ...]],
                  model: type[BaseModel]) -> None:
    """Each secret the file leaves out (or null) is read from its environment variable."""
    for loc, var in secrets(model).items():
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


if TYPE_CHECKING:
    _BaseLoader = yaml.SafeLoader  # the C loader, where PyYAML has libyaml, has the same constructor
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
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


def _read_yaml(shown: str) -> Any:
    try:
        text = Path(shown).read_bytes().decode("utf-8-sig")
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


# -------------------------------------------------------------------------- load


def load(model: type[C], path: str | Path | None = None, env: Mapping[str, str] | None = None, *,
         require_secrets: bool = True) -> C:
    """Read, expand and validate the config into ``model`` (``bot.settings.load_config`` says how)."""
    env = os.environ if env is None else env
    used: dict[Loc, tuple[str, ...]] = {}
    file = Path(DEFAULT_PATH if path is None else path)
    from_file = path is not None or DEFAULT_PATH.is_file()
    if found := dotenv.read(file.parent / ".env"):  # the environment wins over .env
        env = {**found, **env}
    if from_file:
        shown = str(file)
        raw = _read_yaml(shown)
        if raw is None:  # an empty file: all defaults
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(shown, "expected a mapping of sections (agent:, providers:, ...), "
                                     f"got {describe_value(raw)}")
        tree, source = _expand(raw, env, (), used, model), shown
    else:
        tree, source = _tree_from_env(env, used), "built-in defaults and environment (no config.yaml)"
    _fill_secrets(tree, env, used, model)
    try:
        config = model.model_validate(tree)
    except ValidationError as exc:
        raise from_validation(exc, used, model) from None
    config._source = source
    config._source_path = file if from_file else None
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


def _require_secrets(config: CoreConfig, used: Mapping[Loc, tuple[str, ...]], from_file: bool) -> None:
    """The keys of the providers in use (the default model's, the named models') and the tokens
    of enabled channels must be set."""
    known = secrets(type(config))
    wanted = [loc for provider in config.providers_in_use() for loc in known if loc[:2] == ("providers", provider)]
    wanted += [("channels", name, *field.split(".")) for name, section in config.channel_sections().items()
               if section.enabled for field in section.required_secrets()]
    wanted += config.section_secrets()
    for loc in wanted:
        if reduce(getattr, loc, config) is not None:
            continue
        var, names = known[loc], used.get(loc)
        if not from_file:
            chosen = ("agent", "provider") in used  # CHATGATE_PROVIDER named it
            other = "" if chosen or var != "OPENAI_API_KEY" else ", or ANTHROPIC_API_KEY for Anthropic"
            fix = f"set {var}{other}, or write config.yaml"
        elif names:
            fix = f"set {' and '.join(names)}"
        else:
            fix = f"write it here, or ${{{var}}} and set {var}"
        raise ConfigError(dotted(loc), "missing", fix)
