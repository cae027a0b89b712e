"""The interactive ``chatgate init``: the provider and its key, the platforms and their tokens,
who owns the bot, the sandbox; each answer checked live and asked again when it is refused.
Nothing is written until the last answer; Ctrl-C before that leaves everything as it was."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.channels import ChannelSpec
from bot.config import dotenv
from bot.errors import ChannelError, ConfigError, ProviderAuthError, ProviderError, ProviderRequestError
from bot.setup import checks
from bot.setup.answers import Answers, Platform, config_text, env_text, write
from bot.setup.platforms import env_name, secret_var, section, urls_from
from bot.setup.terminal import Terminal

PROVIDERS = {  # name -> (shown, its key's variable, its base URL's variable)
    "openai": ("OpenAI", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("Anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}
PAIRING_WAIT = 300.0  # seconds the owner has to send the bot its code


def existing(config: Path) -> list[Path]:
    return [p for p in (config, config.parent / ".env") if p.exists()]


def next_steps(config: Answers, path: Path) -> list[str]:
    shown = str(path)
    if not config.platforms:
        return [f"Next: chatgate chat -c {shown}     (the assistant in this terminal)"]
    from bot.channels import registry

    where = ", ".join(registry.spec(p.name).display or p.name for p in config.platforms)
    lines = [f"Next: chatgate run -c {shown}     (then message the bot on {where})"]
    for p in config.platforms:
        if not p.owners:
            lines.append(f"  {p.name}: the bot answers strangers with a pairing code; approve yours with "
                         f"`chatgate pairing approve CODE -c {shown}`")
    return lines


def interactive(path: Path, term: Terminal, env: Mapping[str, str]) -> int:
    term.say("chatgate init: a few questions; each answer is checked live. Ctrl-C stops and writes nothing.")
    if found := existing(path):
        names = " and ".join(str(p) for p in found)
        if not term.yes(f"{names} exist{'s' if len(found) == 1 else ''} already. Replace "
                        f"{'it' if len(found) == 1 else 'them'}? (.env keeps its other variables)", False):
            term.say("Nothing written.")
            return 1
    provider, model, key_var, key, base_url = _provider(term, env)
    platforms = _platforms(term, env)
    answers = Answers(provider, model, key_var, key, base_url, platforms, _sandbox(term))
    env_file = write(path, config_text(answers, path.name), env_text(answers, dotenv.read(path.parent / ".env")))
    term.say(f"\nWrote {path} and {env_file} (mode 600: the secrets).")
    for line in next_steps(answers, path):
        term.say(line)
    return 0


def _provider(term: Terminal, env: Mapping[str, str]) -> tuple[str, str, str, str, str | None]:
    from bot.config.schema import DEFAULT_MODELS

    term.say("\nThe language model")
    default = 2 if env.get("ANTHROPIC_API_KEY") and not env.get("OPENAI_API_KEY") else 1
    choice = term.choose("Which provider?", ["OpenAI", "Anthropic",
                                             "an OpenAI-compatible server (vLLM, Ollama, LM Studio ...)"], default)
    name = "anthropic" if choice == 2 else "openai"
    shown, key_var, url_var = PROVIDERS[name]
    base_url: str | None = env.get(url_var) or None
    if choice == 3:
        base_url = term.ask("Its base URL, with /v1", base_url or "http://localhost:11434/v1")
    elif base_url:
        term.say(f"  using {url_var}={base_url}")
    model = term.ask("Model", None if choice == 3 else DEFAULT_MODELS[name])
    if env.get(key_var) and term.yes(f"Use the key in {key_var} from the environment?", True):
        key = env[key_var]
    else:
        key = term.secret(f"{shown}'s API key" if choice != 3 else "The server's API key, any text if it needs none")
    while True:
        term.say("  checking with one short request ...")
        try:
            checks.blocking(checks.provider, name, key, base_url, model)
        except ProviderAuthError:
            term.say(f"  ✗ {shown if choice != 3 else 'the server'} refused the key")
            key = term.secret("The API key")
            continue
        except ProviderRequestError as exc:
            if exc.status == 404 and base_url:  # a compatible server's URL without its /v1, or no such model
                term.say(f"  ✗ not found (404) at {base_url}: the base URL ends in /v1, and the model is one it serves")
                base_url = term.ask("Base URL (OpenAI's ends in /v1)", base_url)
            else:
                term.say(f"  ✗ the request was refused: {exc}")
            model = term.ask("Model", model)
            continue
        except ProviderError as exc:
            term.say(f"  ✗ no answer: {exc}")
            base_url = term.ask("Base URL (OpenAI's ends in /v1)", base_url or "") or None
            continue
        term.say(f"  ✓ {model} answered")
        return name, model, key_var, key, base_url


def _platforms(term: Terminal, env: Mapping[str, str]) -> tuple[Platform, ...]:
    from bot.channels import registry

    specs = [s for s in registry.specs() if s.setup is not None]
    term.say("\nWhere people talk to it (the terminal chat, `chatgate chat`, is always there)")
    picked = term.choose_many("Which platforms? Numbers separated by commas, Enter for none",
                              [s.display or s.name for s in specs])
    return tuple(_platform(term, specs[n - 1], env) for n in picked)


def _platform(term: Terminal, spec: ChannelSpec[Any], env: Mapping[str, str]) -> Platform:
    setup = spec.setup
    assert setup is not None
    shown = spec.display or spec.name
    term.say(f"\n{shown}")
    values: dict[str, str] = {}
    secrets: dict[str, tuple[str, str]] = {}
    for key, value in urls_from(spec, env).items():
        term.say(f"  using {env_name(spec, key)}={value}")
        values[key] = value
    hints = dict(setup.asks)

    def ask(key: str, again: bool = False) -> None:
        var = secret_var(spec, key)
        label = key.replace("_", " ").capitalize()
        if not again:
            term.say(f"  {label}: {hints[key]}")
        if var is None:
            values[key] = term.ask(f"{shown} {key.replace('_', ' ')}", None if again else env.get(env_name(spec, key)))
        elif not again and env.get(var) and term.yes(f"Use {var} from the environment?", True):
            secrets[key] = (var, env[var])
        else:
            secrets[key] = (var, term.secret(f"{shown} {key.replace('_', ' ')}"))

    for key in hints:
        ask(key)
    while True:
        term.say("  checking ...")
        try:
            who = checks.blocking(setup.probe, section(spec, Platform(spec.name, values, secrets)))
        except ConfigError as exc:
            term.say(f"  ✗ {exc}")
            key = exc.key.removeprefix(f"channels.{spec.name}.")
            for again in ([key] if key in hints else list(hints)):
                ask(again, again=True)
            continue
        except ChannelError as exc:
            term.say(f"  ✗ {exc}")
            for key in setup.urls:
                current = values.get(key) or str(spec.config.model_fields[key].default)
                values[key] = term.ask(f"  {shown}'s server ({key})", current)
            continue
        term.say(f"  ✓ {who}")
        break
    return Platform(spec.name, values, secrets, _owner(term, spec, Platform(spec.name, values, secrets), who))


def _owner(term: Terminal, spec: ChannelSpec[Any], p: Platform, who: str) -> tuple[str, ...]:
    setup = spec.setup
    assert setup is not None
    shown = spec.display or spec.name
    term.say(f"  The owner (you): admin commands, no limits, and the only one let in at first.\n"
             f"  Your user id: {setup.owner}")
    pairing = "Enter to pair with a code you send the bot" if setup.await_code else "Enter for none yet"
    while True:
        answer = term.ask(f"  Your {shown} user id, or {pairing}", "")
        if answer:
            try:
                section(spec, p, (answer,))
            except ConfigError as exc:
                term.say(f"  ✗ {exc.problem}")
                continue
            return (answer,)
        if setup.await_code is None:
            term.say("  No owner yet: whoever messages the bot gets a pairing code, approved with "
                     "`chatgate pairing approve CODE`.")
            return ()
        from bot.pairing import new_code

        code = new_code()
        term.say(f"  Send this code to {who} in a private chat: {code}\n"
                 f"  (waiting up to {int(PAIRING_WAIT // 60)} minutes)")
        try:
            found = checks.blocking(setup.await_code, section(spec, p), code, PAIRING_WAIT)
        except (ChannelError, ConfigError) as exc:
            term.say(f"  ✗ {exc}")
            continue
        if found:
            term.say(f"  ✓ the code came from {shown} user {found}: the owner")
            return (found,)
        term.say("  no code came in time")


def _sandbox(term: Terminal) -> bool:
    term.say("\nThe sandbox")
    problem = checks.sandbox()
    if problem:
        term.say(f"  bubblewrap cannot be used here: {problem}\n"
                 "  The shell tool (exec) stays off; everything else works.")
        return False
    term.say("  bubblewrap works here: commands would run in a sandbox (their workspace only, no network).")
    return term.yes("Let the assistant run shell commands for its owners in that sandbox (the exec tool)?", False)
