"""The core's checks of ``chatgate doctor``, and the platforms' own, in order.

Each check returns rows; one that breaks is a failed row naming what broke, never a traceback.
Nothing here changes the bot's state: the database is read (a SQLite file read-only), the
workspace root gets a file that is removed at once, each model one short request.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.channels.checks import Check
from bot.errors import ChatgateError, ConfigError, ProviderAuthError, ProviderError, ProviderRequestError

if TYPE_CHECKING:
    from bot.settings import Config

MODEL_TIMEOUT = 60.0
MODEL_TOKENS = 16  # the answer asked for: "ok" (a reasoning model may need a few more)
DISK_FAIL = 100 * 1024 * 1024  # bytes free below which the store or the workspaces fail soon
DISK_WARN = 1024 * 1024 * 1024


async def run_all(path: str | None, config: Config) -> list[Check]:
    """Every check, in the table's order."""
    found = _config(path, config)
    for step in (_models, _channels, _database):
        found += await _guarded(step.__name__.strip("_"), step, config)
    for sync in (_sandbox, _workspace, _disk, _versions):
        found += await _guarded(sync.__name__.strip("_"), _async(sync), config)
    return found


def _async(step: Callable[[Config], list[Check]]) -> Callable[[Config], Awaitable[list[Check]]]:
    async def run(config: Config) -> list[Check]:
        return await asyncio.to_thread(step, config)
    return run


async def _platform(live: Callable[[Any], Awaitable[list[Check]]], section: Any, config: Config) -> list[Check]:
    """A platform's own live checks of its section (``ChannelSpec.doctor``)."""
    return await live(section)


async def _guarded(name: str, step: Callable[[Config], Awaitable[list[Check]]], config: Config) -> list[Check]:
    try:
        return await step(config)
    except Exception as exc:  # noqa: BLE001 - a check that breaks is a failed row, the others still run
        return [Check.fail(name, f"the check broke: {type(exc).__name__}: {exc}", "report this with the log")]


def _config(path: str | None, config: Config) -> list[Check]:
    from bot.settings import load_config

    shown = path or "the environment"
    try:
        load_config(path, require_secrets=True)
    except ConfigError as exc:
        return [Check.fail("config", str(exc), f"fix {exc.key or 'the file'}, then `chatgate check -c {shown}`")]
    rows = [Check.ok("config", f"{shown} loads, every secret set")]
    for warning in config.warnings():  # "key: problem (what to do)": the advice in its own column
        problem, paren, fix = warning.partition(" (")
        rows.append(Check.warn("config", problem, fix.removesuffix(")") if paren and warning.endswith(")") else
                               "see `chatgate check`"))
    return rows


async def _models(config: Config) -> list[Check]:
    from contextlib import aclosing

    from bot.llm import Message
    from bot.providers import make_provider
    from bot.providers.base import ChatRequest, complete
    from bot.routing.config import catalog_of

    catalog = catalog_of(config)
    rows: list[Check] = []
    seen: set[tuple[str, str]] = set()
    for spec in (catalog.default, *catalog.named):
        if (spec.backend, spec.model) in seen:
            continue
        seen.add((spec.backend, spec.model))
        name = f"model {spec.label}"
        connection = getattr(config.providers, spec.provider)
        if connection.api_key is None:
            rows.append(Check.fail(name, f"providers.{spec.provider}.api_key not set", "set it (or its variable)"))
            continue
        provider = make_provider(spec.backend, api_key=connection.api_key.get_secret_value(),
                                 base_url=connection.base_url, timeout=min(connection.timeout, MODEL_TIMEOUT),
                                 max_retries=0, retry_after_cap=5.0)
        request = ChatRequest(spec.model, "Answer with the word ok.", (Message.user("ok?"),), (), MODEL_TOKENS,
                              reasoning_effort=spec.reasoning_effort)
        try:
            async with aclosing(provider):
                async with asyncio.timeout(MODEL_TIMEOUT):
                    done = await complete(provider, request)
        except ProviderAuthError:
            rows.append(Check.fail(name, f"{spec.provider} refused the key",
                                   f"check providers.{spec.provider}.api_key (or its variable)"))
        except ProviderRequestError as exc:
            rows.append(Check.fail(name, f"{spec.provider} refused the request: {exc}",
                                   f"check the model id {spec.model!r} and that the key may use it"))
        except (ProviderError, TimeoutError) as exc:
            rows.append(Check.fail(name, f"no answer from {connection.base_url}: {exc or 'timed out'}",
                                   f"check the network and providers.{spec.provider}.base_url"))
        else:
            used = done.usage.input_tokens + done.usage.output_tokens
            rows.append(Check.ok(name, f"{done.model or spec.model} answered ({used} tokens)"))
    return rows


async def _channels(config: Config) -> list[Check]:
    from bot.channels import registry

    rows: list[Check] = []
    sections = config.channel_sections()
    for name in config.enabled_channels:
        spec = registry.spec(name)
        if spec.doctor is not None:
            rows += await _guarded(name, partial(_platform, spec.doctor, sections[name]), config)
        elif spec.setup is not None:  # the live look `chatgate init` takes: who the bot is there
            rows.append(await _probed(name, spec.setup.probe, sections[name]))
        elif name != "console":
            rows.append(Check.skip(name, "no live check for this platform"))
    if not [n for n in config.enabled_channels if n != "console"]:
        rows.append(Check.warn("channels", "none enabled",
                               "enable a platform under channels: (or use `chatgate chat`)"))
    return rows


async def _probed(name: str, probe: Callable[[Any], Awaitable[str]], section: Any) -> Check:
    """A platform's ``ChannelSetup.probe`` as a row: who the bot is, or what the platform refused."""
    from bot.errors import ChannelError, ConfigError

    try:
        async with asyncio.timeout(30):
            return Check.ok(f"{name} token", await probe(section))
    except ConfigError as exc:
        return Check.fail(f"{name} token", exc.problem, exc.fix or f"check {exc.key}")
    except (ChannelError, OSError, TimeoutError) as exc:
        return Check.fail(f"{name} token", f"cannot reach it ({exc or type(exc).__name__})",
                          f"check the network, or channels.{name}.base_url")


async def _database(config: Config) -> list[Check]:
    from bot.capabilities import registry
    from bot.store.upgrade import pending_postgres, pending_sqlite

    steps = [(spec.name, spec.migrations) for spec in registry.specs() if spec.migrations]
    url, where = config.storage.database_url, config.storage.shown
    if url is None and not config.storage.path.exists():
        return [_writable("database", config.storage.path.parent, f"{where} not made yet (the first start makes it)")]
    try:
        found = await (pending_postgres(url, steps) if url else pending_sqlite(config.storage.path, steps))
    except ChatgateError as exc:
        return [Check.fail("database", str(exc), "restore a backup, or upgrade chatgate")]
    except (OSError, sqlite3.Error, Exception) as exc:  # noqa: BLE001 - asyncpg's errors: unreachable, refused
        return [Check.fail("database", f"cannot open {where}: {type(exc).__name__}: {exc}",
                           "check storage.url (server, user, password) or storage.path")]
    if not found.names:
        return [Check.ok("database", f"{where}, schema version {found.version}, migrated")]
    advice = ("`chatgate migrate` applies them (a copy is kept first: storage.backups)" if url is None else
              "run `chatgate migrate` as the database's owner; a role with data rights only cannot apply them")
    return [Check.warn("database", f"schema version {found.version}: {len(found.names)} migrations pending "
                                   f"({found.names[0]}, ...)",
                       advice)]


def _sandbox(config: Config) -> list[Check]:
    from bot.tools.bounds import host_cgroups, unenforced
    from bot.tools.sandbox import require_sandbox

    if not config.tools.exec.enabled:
        return [Check.skip("sandbox", "tools.exec is off")]
    settings = config.exec_settings()
    rows: list[Check] = []
    if settings.sandbox != "bwrap":
        rows.append(Check.warn("sandbox", "tools.exec.sandbox: none: commands run unconfined",
                               "install bubblewrap and set tools.exec.sandbox: bwrap"))
    else:
        try:
            require_sandbox(settings)
            rows.append(Check.ok("sandbox", f"bubblewrap builds its sandbox ({shutil.which(settings.bwrap)})"))
        except ConfigError as exc:
            rows.append(Check.fail("sandbox", exc.problem, exc.fix or "see the README's sandbox section"))
    if not settings.limits.cgroup:
        rows.append(Check.skip("cgroups", "tools.exec.limits.cgroup is off"))
        return rows
    root = host_cgroups()
    missing = unenforced(settings.limits, sandboxed=settings.sandbox == "bwrap", root=root)
    if missing:
        rows += [Check.warn("cgroups", m, "run under systemd with Delegate=yes, or give the container a cgroup")
                 for m in missing]
    elif root:
        rows.append(Check.ok("cgroups", f"v{root.version}: pids {'yes' if root.pids else 'no'}, "
                                        f"memory {'yes' if root.memory else 'no'}"))
    else:
        rows.append(Check.warn("cgroups", "none the bot may make: rlimits only",
                               "run under systemd with Delegate=yes for per-command pids and memory bounds"))
    return rows


def _existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _writable(name: str, folder: Path, detail: str) -> Check:
    """``folder`` takes a file (or, when it is not there yet, the folder the bot would make it in)."""
    there = _existing(folder)
    try:
        with tempfile.NamedTemporaryFile(dir=there, prefix=".chatgate-doctor-"):
            pass
    except OSError as exc:
        return Check.fail(name, f"{there} is not writable ({exc.strerror or exc})",
                          f"give the bot's user write access to {there}")
    return Check.ok(name, detail if there == folder else f"{folder} not made yet; {there} writable")


def _workspace(config: Config) -> list[Check]:
    root = config.workspace.root
    return [_writable("workspaces", root, f"{root} writable")]


def _disk(config: Config) -> list[Check]:
    rows: list[Check] = []
    places = {"disk (workspaces)": config.workspace.root}
    if config.storage.database_url is None:
        places["disk (database)"] = config.storage.path.parent
    for name, place in places.items():
        folder = _existing(place)
        free = shutil.disk_usage(folder).free
        shown = f"{free / 1024 ** 3:.1f} GB free at {folder}"
        if free < DISK_FAIL:
            rows.append(Check.fail(name, shown, "free some space: a full disk stops the store"))
        elif free < DISK_WARN:
            rows.append(Check.warn(name, shown, "less than 1 GB: free some space soon"))
        else:
            rows.append(Check.ok(name, shown))
    return rows


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _versions(config: Config) -> list[Check]:
    # the libraries the model calls and the platforms ride on (the chat providers use no vendor SDK)
    sdks = ", ".join(f"{d} {_version(d)}" for d in ("aiohttp", "openai", "python-telegram-bot", "discord.py",
                                                    "slack-bolt"))
    return [Check.ok("versions", f"chatgate {_version('chatgate')}, Python {platform.python_version()}, "
                                 f"SQLite {sqlite3.sqlite_version}, {sys.platform} {os.uname().release}"),
            Check.ok("versions", sdks)]
