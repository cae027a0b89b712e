"""bot.config: YAML -> frozen, validated config; one line per mistake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.errors import ConfigError
from bot.settings import Config, load_config

ROOT = Path(__file__).resolve().parent.parent
KEY = {"OPENAI_API_KEY": "sk-test-0000000000000000wxyz"}


@pytest.fixture
def write(tmp_path: Path):
    def write(text: str, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def error_of(path: Path | str | None, env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, env=env)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ---------------------------------------------------------------- one line per mistake

MISTAKES = [
    # (name, yaml, env, expected line, exact?)
    ("unknown key with suggestion", "agent:\n  modle: gpt-4o\n", KEY,
     'agent.modle: unknown key (did you mean "model"?)', True),
    ("unknown section", "agnet: {}\n", KEY, 'agnet: unknown key (did you mean "agent"?)', True),
    ("unknown key without suggestion", "channels:\n  matrix: {}\n", KEY,
     "channels.matrix: unknown key (allowed: console, telegram, discord, slack, whatsapp)", True),
    ("unknown key in a pricing entry", "pricing:\n  m:\n    input: 1\n    output: 2\n    cached: 1\n", KEY,
     'pricing.m.cached: unknown key (did you mean "cache_read"?)', True),
    ("wrong type", "runs:\n  max_concurrent: lots\n", KEY,
     'runs.max_concurrent: expected an integer, got "lots"', True),
    ("a bool is not an integer", "agent:\n  max_iterations: yes\n", KEY,
     "agent.max_iterations: expected an integer, got true", True),
    ("empty value", "agent:\n  max_iterations:\n", KEY,
     "agent.max_iterations: expected an integer, got nothing", True),
    ("fraction", "agent:\n  max_iterations: 2.5\n", KEY, "agent.max_iterations: expected an integer, got 2.5", True),
    ("float", "providers:\n  openai:\n    timeout: soon\n", KEY,
     'providers.openai.timeout: expected a number, got "soon"', True),
    ("bool", "channels:\n  telegram:\n    enabled: maybe\n", KEY,
     'channels.telegram.enabled: expected true or false, got "maybe"', True),
    ("section is a scalar", "agent: gpt-4o\n", KEY, 'agent: expected a mapping', False),
    ("list expected", "agent:\n  identity_links:\n    alice: telegram:1\n", KEY,
     'agent.identity_links.alice: expected a list, got "telegram:1"', True),
    ("identity link format", "agent:\n  identity_links:\n    alice: [telegram123]\n", KEY,
     'agent.identity_links.alice[0]: expected "platform:user_id"', False),
    ("invalid choice", "agent:\n  provider: gpt\n", KEY,
     'agent.provider: must be one of openai, anthropic, got "gpt"', True),
    ("invalid queue mode", "runs:\n  queue_mode: drop\n", KEY,
     'runs.queue_mode: must be one of collect, followup, interrupt, got "drop"', True),
    ("invalid group scope", "workspace:\n  group_scope: per-thread\n", KEY,
     'workspace.group_scope: must be one of per-group, per-user, got "per-thread"', True),
    ("invalid log level", "logging:\n  level: verbose\n", KEY,
     'logging.level: must be one of DEBUG, INFO, WARNING, ERROR, got "verbose"', True),
    ("above range", "agent:\n  max_iterations: 500\n", KEY, "agent.max_iterations: must be at most 200, got 500", True),
    ("below range", "agent:\n  max_iterations: 0\n", KEY, "agent.max_iterations: must be at least 1, got 0", True),
    ("retries range", "providers:\n  anthropic:\n    max_retries: 11\n", KEY,
     "providers.anthropic.max_retries: must be at most 10, got 11", True),
    ("runs range", "runs:\n  max_concurrent: 0\n", KEY, "runs.max_concurrent: must be at least 1, got 0", True),
    ("timeout must be positive", "providers:\n  openai:\n    timeout: 0\n", KEY,
     "providers.openai.timeout: must be more than 0, got 0", True),
    ("answer cap above the window", "agent:\n  context_window: 8000\n  max_tokens: 8000\n", KEY,
     "agent.max_tokens: must be less than agent.context_window (8000), got 8000", True),
    ("answer cap above the model's window", "agent:\n  model: gpt-4\n  max_tokens: 9000\n", KEY,
     "agent.max_tokens: must be less than the context window of gpt-4 (8192; set agent.context_window", False),
    ("compaction ratio range", "agent:\n  compaction:\n    trigger_ratio: 1.5\n", KEY,
     "agent.compaction.trigger_ratio: must be less than 1, got 1.5", True),
    ("compaction unknown key", "agent:\n  compaction:\n    ratio: 0.5\n", KEY,
     "agent.compaction.ratio: unknown key", False),
    ("empty model", "agent:\n  model: ''\n", KEY, "agent.model: must not be empty", True),
    ("bad agent id", "agent:\n  id: my agent\n", KEY, "agent.id: may contain only", False),
    ("base_url without scheme", "providers:\n  openai:\n    base_url: localhost:8000/v1\n", KEY,
     'providers.openai.base_url: expected an http:// or https:// URL, got "localhost:8000/v1"', True),
    ("pricing entry incomplete", "pricing:\n  m:\n    input: 1\n", KEY, "pricing.m.output: missing (add this key)",
     True),
    ("missing provider key", "agent:\n  provider: openai\n", {},
     "providers.openai.api_key: missing (set OPENAI_API_KEY)", True),
    ("missing anthropic key", "agent:\n  provider: anthropic\n", KEY,
     "providers.anthropic.api_key: missing (set ANTHROPIC_API_KEY)", True),
    ("key from a named variable", "providers:\n  openai:\n    api_key: ${MY_KEY}\n", {},
     "providers.openai.api_key: missing (set MY_KEY)", True),
    ("key written empty", "providers:\n  openai:\n    api_key: ''\n", {},
     "providers.openai.api_key: missing (write it here, or ${OPENAI_API_KEY} and set OPENAI_API_KEY)", True),
    ("blank key", "providers:\n  openai:\n    api_key: '   '\n", {}, "providers.openai.api_key: missing", False),
    ("unknown key in a named model", "models:\n  fast: {provider: openai, model: x, reasoning_efort: high}\n", KEY,
     'models.fast.reasoning_efort: unknown key (did you mean "reasoning_effort"?)', True),
    ("a misspelt models key is no model", "models:\n  swich: everyone\n", KEY,
     'models.swich: unknown key (did you mean "switch"?)', True),
    ("a named model without its id", "models:\n  fast: {provider: openai}\n", KEY,
     "models.fast.model: missing (add this key)", True),
    ("a reserved model name", "models:\n  default: {provider: openai, model: x}\n", KEY,
     "models.default: is not a usable model name", False),
    ("responses is openai's", "models:\n  deep: {provider: anthropic, model: x, api: responses}\n", KEY,
     "models.deep.api: responses is OpenAI's Responses API (use it with provider: openai)", True),
    ("allowed names people", "models:\n  fast: {provider: openai, model: x, allowed: [bob]}\n", KEY,
     'models.fast.allowed[0]: must be a person as "platform:user_id", such as "telegram:123", got "bob"', True),
    ("a fallback that is no model", "agent: {fallbacks: [fsat]}\nmodels:\n  fast: {provider: openai, model: x}\n",
     KEY, 'agent.fallbacks[0]: "fsat" is not a model in models (did you mean "fast"?)', True),
    ("titles by no model", "models:\n  titles: fast\n", KEY,
     'models.titles: "fast" is not a model in models (add it under models:)', True),
    ("a named model's answer cap", "models:\n  old: {provider: openai, model: gpt-4, max_tokens: 9000}\n", KEY,
     "models.old.max_tokens: must be less than the context window of old (8192", False),
    ("a named model's provider key", "agent: {model: smart}\nmodels:\n  smart: {provider: anthropic, model: c}\n",
     KEY, "providers.anthropic.api_key: missing (set ANTHROPIC_API_KEY)", True),
    ("enabled telegram without token", "channels:\n  telegram:\n    enabled: true\n", KEY,
     "channels.telegram.token: missing (set TELEGRAM_BOT_TOKEN)", True),
    ("enabled discord without token", "channels:\n  discord: {enabled: true}\n", KEY,
     "channels.discord.token: missing (set DISCORD_BOT_TOKEN)", True),
    ("enabled slack without app token", "channels:\n  slack: {enabled: true}\n", {**KEY, "SLACK_BOT_TOKEN": "xoxb-1"},
     "channels.slack.app_token: missing (set SLACK_APP_TOKEN)", True),
    ("env value of the wrong type", "runs:\n  max_concurrent: ${RUNS}\n", {**KEY, "RUNS": "lots"},
     'runs.max_concurrent: expected an integer, got "lots" (check RUNS)', True),
    ("env value with a newline stays one line", "runs:\n  max_concurrent: ${RUNS}\n", {**KEY, "RUNS": "a\nb"},
     'runs.max_concurrent: expected an integer, got "a\\nb" (check RUNS)', True),
    ("bad variable reference", "agent:\n  model: ${MODEL-gpt}\n", KEY,
     'agent.model: bad variable reference "${MODEL-gpt}" (write ${NAME} or ${NAME:-default}; $${ for a literal ${)',
     True),
    ("unterminated reference", "agent:\n  model: ${MODEL\n", KEY, "agent.model: bad variable reference", False),
    ("non-text key", "agent:\n  identity_links:\n    1: ['telegram:1']\n", KEY,
     "agent.identity_links.1: keys must be text, got 1 (quote it)", True),
    ("file is a list", "- agent\n", KEY, "config.yaml: expected a mapping of sections", False),
    ("duplicate key", "agent:\n  model: a\n  model: b\n", KEY,
     'config.yaml: YAML error at line 3, column 3: duplicate key "model" (first at line 2) (remove one of them)', True),
    ("python tag", "agent: !!python/object:os.system {}\n", KEY, "(remove the tag; plain YAML only)", False),
    ("telegram owner by username", "channels:\n  telegram:\n    owners: ['@alice']\n", KEY,
     'channels.telegram.owners: "@alice" can never match: Telegram user ids are numbers such as 123456789 '
     "(ask @userinfobot), not @usernames", True),
    ("telegram allow_from name", "channels:\n  telegram:\n    allow_from: [42, bob]\n", KEY,
     'channels.telegram.allow_from: "bob" can never match', False),
    ("webhook secret with spaces", "channels:\n  telegram:\n    webhook: {secret_token: 'not ok!'}\n", KEY,
     "channels.telegram.webhook.secret_token: Telegram accepts only 1 to 256 of A-Z, a-z, 0-9, _ and -", True),
    ("webhook secret too long", f"channels:\n  telegram:\n    webhook: {{secret_token: {'a' * 257}}}\n", KEY,
     "channels.telegram.webhook.secret_token: Telegram accepts only 1 to 256", False),
    ("webhook url not https", "channels:\n  telegram:\n    webhook: {url: 'http://bot.example.com/t'}\n", KEY,
     "channels.telegram.webhook.url: must be an https:// URL (Telegram posts updates only to https; "
     "put a TLS proxy in front of the bot)", True),

    ("storage path is a directory", "storage:\n  path: .\n", KEY,
     "storage.path: . is a directory (give the path of the database file inside it, e.g. data/chatgate.db)", True),
]


@pytest.mark.parametrize(("text", "env", "expected", "exact"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_one_line(write, monkeypatch, text, env, expected, exact) -> None:
    monkeypatch.chdir(write(text).parent)  # error lines name the file as given
    message = error_of("config.yaml", env)
    if exact:
        assert message == expected
    else:
        assert expected in message


def test_yaml_syntax_error_names_file_line_and_column(write) -> None:
    path = write("agent:\n  model: gpt\n   provider: openai\n")
    message = error_of(path, KEY)
    assert message.startswith(f"{path}: YAML error at line 3, column 12: mapping values are not allowed")
    assert "quote values" in message


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert error_of(missing, KEY) == f"{missing}: file not found (check the path, or copy config.example.yaml there)"
    assert error_of(tmp_path, KEY) == f"{tmp_path}: is a directory (give the path of a YAML file)"


def test_wrong_type_of_a_secret_never_echoes_it(write) -> None:
    for text in ("providers:\n  openai:\n    api_key: 123456789012345\n",
                 "providers:\n  openai: 123456789012345\n",
                 "channels:\n  telegram: ${TELEGRAM_BOT_TOKEN}\n"):
        message = error_of(write(text), {"TELEGRAM_BOT_TOKEN": "123456789012345"})
        assert "123456789012345" not in message


def test_errors_are_reported_first_only_and_one_line(write) -> None:
    message = error_of(write("agent:\n  modle: x\n  max_iterations: lots\nruns:\n  queue_mode: drop\n"), KEY)
    assert message.count(":") == 1 and "\n" not in message


# ---------------------------------------------------------------- ${VAR} expansion

EXPANSIONS = [
    # (value as written in YAML, env, system_prompt after loading)
    ("${GREETING}", {"GREETING": "hello"}, "hello"),
    ("'${GREETING}'", {"GREETING": "hello"}, "hello"),
    ("say ${A} and ${B}!", {"A": "1", "B": "2"}, "say 1 and 2!"),
    ("x${UNSET}y", {}, "xy"),
    ("${UNSET:-fallback}", {}, "fallback"),
    ("${EMPTY:-fallback}", {"EMPTY": ""}, "fallback"),
    ("${SET:-fallback}", {"SET": "real"}, "real"),
    ("'${UNSET:-a: b # c}'", {}, "a: b # c"),
    ("'${UNSET:-}'", {}, ""),
    ("$${LITERAL}", {"LITERAL": "no"}, "${LITERAL}"),
    ("cost $$5 and $HOME", {"HOME": "/root"}, "cost $$5 and $HOME"),
    # YAML-special characters in the value land verbatim; they cannot break the structure.
    ("${TRICKY}", {"TRICKY": 'a: b # c\n- [x] {y} "q" \'r\' &anchor *ref !tag |'},
     'a: b # c\n- [x] {y} "q" \'r\' &anchor *ref !tag |'),
    ("${TRICKY}", {"TRICKY": "${NOT_AGAIN}"}, "${NOT_AGAIN}"),
]


@pytest.mark.parametrize(("written", "env", "expected"), EXPANSIONS)
def test_env_expansion(write, written, env, expected) -> None:
    config = load_config(write(f"agent:\n  system_prompt: {written}\n"), env={**KEY, **env})
    assert config.agent.system_prompt == expected


def test_expansion_reaches_lists_numbers_and_secrets_but_not_keys(write) -> None:
    text = ("agent:\n  identity_links:\n    ${PERSON}: ['telegram:${TG_ID}']\n"
            "runs:\n  max_concurrent: ${RUNS:-8}\n"
            "providers:\n  openai:\n    api_key: ${MY_KEY}\n")
    config = load_config(write(text), env={"TG_ID": "42", "MY_KEY": "k-1", "PERSON": "bob"})
    assert config.agent.identity_links == {"${PERSON}": ("telegram:42",)}
    assert config.runs.max_concurrent == 8
    assert config.providers.openai.api_key.get_secret_value() == "k-1"


def test_secret_left_out_of_the_file_comes_from_its_variable(write) -> None:
    env = {"OPENAI_API_KEY": " sk-from-env\n", "TELEGRAM_BOT_TOKEN": "123:abc"}
    config = load_config(write("channels:\n  telegram:\n    enabled: true\n"), env=env)
    assert config.providers.openai.api_key.get_secret_value() == "sk-from-env"  # stripped
    assert config.channels.telegram.token.get_secret_value() == "123:abc"


def test_only_the_selected_provider_and_enabled_channels_need_secrets(write) -> None:
    config = load_config(write("agent:\n  provider: anthropic\n"), env={"ANTHROPIC_API_KEY": "a"})
    assert config.providers.openai.api_key is None
    assert config.channels.telegram.token is None
    assert config.agent.model == "claude-sonnet-4-5"  # the default model follows the provider


# ---------------------------------------------------------------- defaults and modes


def test_defaults(write) -> None:
    config = load_config(write(""), env=KEY)
    a, o, an = config.agent, config.providers.openai, config.providers.anthropic
    assert (a.id, a.provider, a.model, a.max_iterations) == ("main", "openai", "gpt-4o-mini", 20)
    assert (a.context_window, a.window, a.max_message_chars, a.max_tokens) == (None, 128000, 32768, 4096)
    c = a.compaction
    assert (c.enabled, c.trigger_ratio, c.trigger_messages, c.keep_last, c.summary_max_tokens, c.memory_flush) == (
        True, 0.75, 50, 4, 1024, "dm")
    assert (a.system_prompt, a.dm_scope, a.identity_links) == (None, "per-user", {})
    assert (o.base_url, o.timeout, o.max_retries, o.retry_after_cap) == ("https://api.openai.com/v1", 120.0, 3, 60.0)
    assert (an.base_url, an.timeout, an.max_retries, an.retry_after_cap) == \
        ("https://api.anthropic.com", 120.0, 3, 60.0)
    assert config.pricing == {}
    assert config.enabled_channels == ("console",)
    assert config.channels.telegram.base_url == "https://api.telegram.org"
    assert config.storage.path == Path("data/chatgate.db")
    assert config.workspace.root == Path("workspaces")
    assert (config.runs.max_concurrent, config.runs.queue_mode) == (16, "collect")
    assert (config.logging.level, config.logging.format) == ("INFO", "text")
    assert config.provider_settings() is o


def test_empty_sections_mean_defaults_and_levels_ignore_case(write) -> None:
    config = load_config(write("channels:\n  telegram:\nlogging:\n  level: debug\n"), env=KEY)
    assert config.channels.telegram.enabled is False
    assert config.logging.level == "DEBUG"


def test_pricing_overrides(write) -> None:
    config = load_config(write("pricing:\n  my-model:\n    input: 0.5\n    output: 1\n    cache_read: 0.05\n"), env=KEY)
    price = config.pricing["my-model"]
    assert (price.input, price.output, price.cache_read, price.cache_write) == (0.5, 1.0, 0.05, None)


NO_FILE = [
    # (env, provider, model, base_url of that provider)
    (KEY, "openai", "gpt-4o-mini", "https://api.openai.com/v1"),
    ({"ANTHROPIC_API_KEY": "sk-ant"}, "anthropic", "claude-sonnet-4-5", "https://api.anthropic.com"),
    ({**KEY, "ANTHROPIC_API_KEY": "sk-ant"}, "openai", "gpt-4o-mini", "https://api.openai.com/v1"),
    ({**KEY, "ANTHROPIC_API_KEY": "sk-ant", "CHATGATE_PROVIDER": "anthropic"}, "anthropic", "claude-sonnet-4-5",
     "https://api.anthropic.com"),
    ({"OPENAI_API_KEY": "local", "OPENAI_BASE_URL": "http://localhost:11434/v1", "CHATGATE_MODEL": "llama3.2"},
     "openai", "llama3.2", "http://localhost:11434/v1"),
    ({"ANTHROPIC_API_KEY": "a", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/anthropic/"}, "anthropic",
     "claude-sonnet-4-5", "http://127.0.0.1:9/anthropic/"),
]


@pytest.mark.parametrize(("env", "provider", "model", "base_url"), NO_FILE)
def test_no_file_uses_defaults_and_environment(tmp_path, monkeypatch, env, provider, model, base_url) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(env=env)
    assert (config.agent.provider, config.agent.model, config.provider_settings().base_url) == (provider, model, base_url)
    assert config.enabled_channels == ("console",)


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "providers.openai.api_key: missing (set OPENAI_API_KEY, or ANTHROPIC_API_KEY for Anthropic, "
         "or write config.yaml)"),
    ({"OPENAI_API_KEY": "  "}, "providers.openai.api_key: missing (set OPENAI_API_KEY, or ANTHROPIC_API_KEY for "
                               "Anthropic, or write config.yaml)"),
    ({"CHATGATE_PROVIDER": "anthropic", "OPENAI_API_KEY": "k"},
     "providers.anthropic.api_key: missing (set ANTHROPIC_API_KEY, or write config.yaml)"),
    ({"CHATGATE_PROVIDER": "gpt", "OPENAI_API_KEY": "k"},
     'agent.provider: must be one of openai, anthropic, got "gpt" (check CHATGATE_PROVIDER)'),
    ({"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "localhost:8000"},
     'providers.openai.base_url: expected an http:// or https:// URL, got "localhost:8000" (check OPENAI_BASE_URL)'),
])
def test_no_file_errors(tmp_path, monkeypatch, env, expected) -> None:
    monkeypatch.chdir(tmp_path)
    assert error_of(None, env) == expected


def test_no_path_reads_config_yaml_in_the_working_directory(write, monkeypatch) -> None:
    monkeypatch.chdir(write("agent:\n  model: from-file\n").parent)
    config = load_config(env={**KEY, "CHATGATE_MODEL": "ignored-with-a-file"})
    assert config.agent.model == "from-file"
    assert "config.yaml" in config.describe()


@pytest.mark.parametrize("url", [
    "http://localhost:11434/v1", "http://host:8000/v1", "http://host:8000/v1/", "https://proxy.example.com/openai",
    "http://127.0.0.1:8080",
])
def test_base_url_is_passed_through_unchanged(write, url) -> None:
    text = f"providers:\n  openai:\n    base_url: {url}\n  anthropic:\n    base_url: {url}\n" \
           f"channels:\n  telegram:\n    base_url: {url}\n"
    config = load_config(write(text), env=KEY)
    assert config.providers.openai.base_url == url
    assert config.providers.anthropic.base_url == url
    assert config.channels.telegram.base_url == url


# ---------------------------------------------------------------- example, describe, frozen


def test_good_ids_and_webhook_settings_pass(write) -> None:
    config = load_config(write("channels:\n  telegram:\n    owners: [123456789]\n    allow_from: ['42']\n"
                               "    webhook: {url: 'https://bot.example.com/t', secret_token: A-z_09}\n"
                               ), env=KEY)
    assert config.channels.telegram.owners == ("123456789",)
    assert config.owner_ids() == ("telegram:123456789",)
    assert "Discord user ids are numbers" in error_of(write("channels: {discord: {owners: ['@me']}}\n"), KEY)
    local = load_config(write("channels:\n  telegram:\n    base_url: http://127.0.0.1:8081\n"
                              "    webhook: {url: 'http://127.0.0.1:8443/t'}\n"), env=KEY)  # a self-hosted Bot API
    assert local.channels.telegram.webhook.url == "http://127.0.0.1:8443/t"


def test_a_secret_that_breaks_the_rule_is_never_echoed(write) -> None:
    message = error_of(write("channels: {telegram: {webhook: {secret_token: 'hunter 2'}}}\n"), KEY)
    assert "hunter" not in message


def test_example_file_loads_and_matches_the_defaults(tmp_path, monkeypatch) -> None:
    example = load_config(ROOT / "config.example.yaml", env=KEY)
    monkeypatch.chdir(tmp_path)
    assert example.model_dump() == load_config(env=KEY).model_dump()
    assert error_of(ROOT / "config.example.yaml", {}) == "providers.openai.api_key: missing (set OPENAI_API_KEY)"


def test_describe_masks_every_secret(write) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ-abcd",
        "TELEGRAM_BOT_TOKEN": "123456789:AAHsecretsecretsecretsecret-tg12",
        "SLACK_BOT_TOKEN": "xoxb-secretsecretsecretsecret-sl34",
        "SLACK_APP_TOKEN": "short-app",
    }
    text = ("agent:\n  model: gpt-4o\nproviders:\n  openai:\n    base_url: http://localhost:8000/v1\n"
            "channels:\n  telegram: {enabled: true}\n  slack: {enabled: true}\n")
    config = load_config(write(text), env=secrets)
    summary = config.describe()
    for value in secrets.values():
        assert value not in summary
        assert value not in repr(config) and value not in str(config)
        assert value not in config.model_dump_json()
    assert "sk-…abcd from OPENAI_API_KEY" in summary
    assert "…tg12" in summary and "…sl34" in summary
    assert "app_token (set)" in summary  # too short to show any of it
    for shown in ("openai", "gpt-4o", "http://localhost:8000/v1", "console", "telegram", "slack",
                  "data/chatgate.db", "workspaces", "16", "collect"):
        assert shown in summary
    assert "discord" not in summary


def test_check_shows_each_pre_tool_hook_without_its_command_line(write) -> None:
    text = ("hooks:\n  pre_tool:\n    - {tools: [exec, 'mcp__*'], run: 'curl -H \"X-Token: s3cret\" http://policy/check'}\n"
            "    - {run: ./audit.sh, timeout: 3}\n")
    summary = load_config(write(text), env=KEY).describe()
    assert "hooks      before exec, mcp__*: curl … (10 s)" in summary
    assert "hooks      before *: ./audit.sh … (3 s)" in summary
    assert "s3cret" not in summary
    assert "hooks" not in load_config(write(""), env=KEY).describe()


def test_a_blank_pre_tool_hook_is_refused(write) -> None:
    # ``sh -c "   "`` exits 0: such a hook would let every call through, so the config says so at start
    with pytest.raises(ConfigError) as info:
        load_config(write("hooks: {pre_tool: [{run: '  '}, {run: ./audit.sh}]}\n"), env=KEY)
    assert str(info.value).startswith("hooks.pre_tool[0].run: is blank: give the command that judges the call")


def test_config_is_frozen(write) -> None:
    config = load_config(write(""), env=KEY)
    with pytest.raises(ValidationError):
        config.agent = config.agent  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.agent.model = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.providers.openai.base_url = "http://x"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs"):
        Config.model_validate({"nope": 1})


def test_import_is_light() -> None:
    code = ("import sys, bot.config; "
            "heavy = [m for m in ('openai', 'anthropic', 'telegram', 'discord', 'slack', 'slack_bolt', 'slack_sdk', "
            "'tiktoken', 'aiosqlite', 'httpx') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]"


def test_check_warns_when_agent_model_looks_like_a_misspelt_model_name(write) -> None:
    config = load_config(write("agent: {model: fsat}\nmodels:\n  fast: {provider: openai, model: x}\n"), env=KEY)
    assert config.warnings() == ['agent.model "fsat" is not a name in models, so it is used as a model id of '
                                 'openai (did you mean "fast"?)']
    assert "models     fast (openai x); /model: owners" in config.describe()
