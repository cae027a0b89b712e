"""What ``chatgate init`` decided, as the two files it writes, and writing them at once.

Pure but for ``write``: ``config_text`` and ``env_text`` render the answers; ``write`` puts both
files in place by renames (the temporary files beside them), with Ctrl-C held back for the two
renames, so an interrupted setup leaves the folder as it was.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.config import dotenv


@dataclass(frozen=True, slots=True)
class Platform:
    """One platform's answers: plain keys (dotted below ``channels.<name>``) written as given,
    secret keys written as ``${VAR}`` with the value in ``.env``, and who owns the bot there."""

    name: str
    values: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # key -> (VAR, value)
    owners: tuple[str, ...] = ()

    @property
    def dm_policy(self) -> str:
        """The owner is let in by id; without one, strangers get a pairing code to approve."""
        return "allowlist" if self.owners else "pairing"


@dataclass(frozen=True, slots=True)
class Answers:
    provider: str  # openai | anthropic
    model: str
    key_var: str  # OPENAI_API_KEY
    key: str
    base_url: str | None = None  # None: the provider's own
    platforms: tuple[Platform, ...] = ()
    exec_tool: bool = False  # the shell tool, in the bubblewrap sandbox, for the owners

    def env(self) -> dict[str, str]:
        """The variables ``.env`` holds: every secret named in the config."""
        found = {self.key_var: self.key}
        for p in self.platforms:
            found.update(dict(p.secrets.values()))
        return found


def _nest(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[last] = value


def config_tree(a: Answers) -> dict[str, Any]:
    provider: dict[str, Any] = {"api_key": f"${{{a.key_var}}}"}
    if a.base_url:
        provider["base_url"] = a.base_url
    channels: dict[str, Any] = {}
    for p in a.platforms:
        section: dict[str, Any] = {"enabled": True}
        for key, value in p.values.items():
            _nest(section, key, value)
        for key, (var, _) in p.secrets.items():
            _nest(section, key, f"${{{var}}}")
        section["dm_policy"] = p.dm_policy
        if p.owners:
            section["allow_from"] = list(p.owners)
            section["owners"] = list(p.owners)
        channels[p.name] = section
    tree: dict[str, Any] = {"agent": {"provider": a.provider, "model": a.model},
                            "providers": {a.provider: provider}}
    if channels:
        tree["channels"] = channels
    tree["storage"] = {"path": "data/chatgate.db"}
    tree["workspace"] = {"root": "workspaces"}
    if a.exec_tool:
        tree["tools"] = {"exec": {"enabled": True, "sandbox": "bwrap"}}
    return tree


HEADER = """\
# Written by `chatgate init`. Every secret is a ${VAR}: its value is in .env beside this file
# (mode 600), which chatgate reads at start; a variable set in the environment wins over .env.
# Every other key and its default: docs/reference/configuration.md, or config.example.yaml.
# `chatgate check -c {name}` shows what would start.

"""


def config_text(a: Answers, name: str = "config.yaml") -> str:
    body = yaml.safe_dump(config_tree(a), sort_keys=False, allow_unicode=True, default_flow_style=False)
    return HEADER.replace("{name}", name) + body


def env_text(a: Answers, kept: Mapping[str, str] | None = None) -> str:
    """``.env``: the secrets of these answers, after the variables of an earlier ``.env`` that
    these answers do not set (``kept``)."""
    ours = a.env()
    lines = ["# Secrets of chatgate's config.yaml (written by `chatgate init`). Keep this file private."]
    lines += [dotenv.line(k, v) for k, v in (kept or {}).items() if k not in ours]
    lines += [dotenv.line(k, v) for k, v in ours.items()]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _no_interrupt() -> Iterator[None]:
    """Ctrl-C waits until the block is done (the renames: both files, or neither)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to hold back
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _temporary(folder: Path, name: str, text: str, mode: int) -> Path:
    fd, path = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(path).unlink(missing_ok=True)
        raise
    return Path(path)


def write(config: Path, config_body: str, env_body: str) -> Path:
    """Write ``config`` and the ``.env`` beside it (mode 600) at once; the path of ``.env``."""
    folder = config.parent
    folder.mkdir(parents=True, exist_ok=True)
    env = folder / ".env"
    staged: list[tuple[Path, Path]] = []
    try:
        staged.append((_temporary(folder, ".env", env_body, 0o600), env))
        staged.append((_temporary(folder, config.name, config_body, 0o644), config))
        with _no_interrupt():
            for temp, final in staged:
                os.replace(temp, final)
            staged.clear()
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
    return env
