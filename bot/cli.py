"""chatgate's command line: run | chat | check | traces | sessions | pairing | migrate, and each
capability's own (status, doctor, dashboard, mcp, schedules ...).

Exit codes: 0 done, 1 failed while running, 2 bad configuration or usage.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.capabilities.commandline import no_database, store_of
from bot.errors import ChatgateError, ConfigError
from bot.tasks import cancel_all

if TYPE_CHECKING:
    from bot.app import App
    from bot.channels import Channel
    from bot.settings import Config

log = logging.getLogger("chatgate")

SHUTDOWN_GRACE = 5.0  # seconds to stop channels, cancel runs and close the store


def main(argv: Sequence[str] | None = None) -> int:
    gc.disable()  # `run` starts with ~190,000 objects that live as long as it: passes over them took 1/8 of the start
    try:
        return _command(argv)
    finally:
        gc.enable()


def _command(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="chatgate", description="A self-hosted LLM assistant for chat platforms.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start every enabled channel and serve until stopped")
    run.add_argument("-c", "--config", required=True, help="path to config.yaml")
    chat = sub.add_parser("chat", help="chat with the assistant in this terminal")
    chat.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else environment)")
    check = sub.add_parser("check", help="validate a config file and show what would start")
    check.add_argument("-c", "--config", required=True, help="path to config.yaml")
    traces = sub.add_parser("traces", help="show what recent runs did and cost")
    traces.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    traces.add_argument("--session", help="only this session key")
    traces.add_argument("--last", type=int, default=20, help="how many runs (default 20)")
    sessions = sub.add_parser("sessions", help="list conversations: their titles, models and last use")
    sessions.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    sessions.add_argument("--last", type=int, default=20, help="how many (default 20)")
    sessions.add_argument("--all", action="store_true", help="also the sessions /new left behind")
    pairing = sub.add_parser("pairing", help="approve people who asked to talk to the bot (dm_policy: pairing)")
    pairing.add_argument("-c", "--config", help="path to config.yaml (default: ./config.yaml, else defaults)")
    pairing_sub = pairing.add_subparsers(dest="action", required=True)
    pairing_sub.add_parser("list", help="pending codes and approved senders")
    approve = pairing_sub.add_parser("approve", help="approve the sender of a code")
    approve.add_argument("code")
    revoke = pairing_sub.add_parser("revoke", help="take back an approval")
    revoke.add_argument("sender", help="PLATFORM:USER_ID, as `pairing list` shows it")
    from bot.capabilities import registry as capabilities

    for spec in capabilities.specs():
        if spec.cli is not None:
            spec.cli(sub)  # each subcommand sets ``run``: async (config, args) -> exit code
    args = parser.parse_args(argv)
    if args.command != "run":  # the others do their work at once, or serve (chat, the dashboard alone)
        gc.enable()
    if getattr(args, "no_config", False):  # a capability's subcommand that reads its config itself, or none
        return _guarded(args.run(None, args))

    from bot.settings import load_config

    try:
        config = load_config(args.config, require_secrets=args.command not in ("traces", "sessions", "pairing")
                             and getattr(args, "run", None) is None)
        if args.command in ("run", "chat", "check") and config.tools.exec.enabled:
            from bot.tools.sandbox import require_sandbox

            require_sandbox(config.exec_settings())  # bubblewrap missing or crippled: stop now
    except ConfigError as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        print(config.describe())
        for warning in config.warnings():
            print(f"warning: {warning}", file=sys.stderr)
        for spec in capabilities.specs():
            if spec.probe is not None and spec.enabled(config):
                print("\n".join(asyncio.run(spec.probe(config))))
        return 0
    if getattr(args, "run", None) is not None:  # a capability's subcommand
        if getattr(args, "logs", False):
            _setup_logging(config.logging.level, secrets=config.secret_values(), format=config.logging.format,
                           instance=config.cluster.instance)
        return _guarded(args.run(config, args), config_code=2)
    if args.command == "traces":
        return _guarded(_traces(config, args.session, args.last))
    if args.command == "sessions":
        return _guarded(_sessions(config, args.last, args.all))
    if args.command == "pairing":
        return _guarded(_pairing(config, args))
    # chat: the terminal is the conversation, so logs go to a file beside the database
    log_file = None if args.command == "run" else config.storage.path.parent / "chatgate.log"
    _setup_logging(config.logging.level, log_file, secrets=config.secret_values(), format=config.logging.format,
                   instance=config.cluster.instance)
    return _guarded(_serve(config) if args.command == "run" else _chat(config), config_code=2)


def _guarded(command: Coroutine[Any, Any, int], *, config_code: int = 1) -> int:
    """Run ``command``; a ``ChatgateError`` (a store that cannot be opened...) is one line and exit 1,
    ``config_code`` for a ``ConfigError`` (the bot and capabilities' subcommands: 2, bad configuration)."""
    try:
        return int(asyncio.run(command))
    except ChatgateError as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return config_code if isinstance(exc, ConfigError) else 1


def _setup_logging(level: str, file: Path | None = None, *, secrets: Iterable[str] = (), format: str = "text",
                   instance: str | None = None) -> logging.Handler:
    """One handler on the root logger (stderr, or ``file`` created 0600) writing lines of text
    or of JSON (``logging.format``, ``bot.logs``), and the Redactor on every root handler: no
    record reaches a log with a configured secret or a known key."""
    from bot.logs import TEXT_FORMAT, JsonFormatter, this_instance
    from bot.tracing import RedactingFilter, Redactor

    if file is None:
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
    else:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        os.chmod(file, 0o600)  # an older log may have been created with the umask's mode
        handler = logging.FileHandler(file, encoding="utf-8")
    handler.setFormatter(JsonFormatter(this_instance(instance)) if format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    redacting = RedactingFilter(Redactor(secrets))  # on every root handler: a filter on the logger misses children's
    for each in root.handlers:
        each.addFilter(redacting)
    return handler


def _channels(config: Config, *, interactive: bool) -> dict[str, Channel]:
    """The enabled channels, built through the registry: an SDK is imported only when its
    channel is enabled. The terminal joins only when there is one."""
    from bot.capabilities import registry as capabilities
    from bot.channels import registry

    sections = config.channel_sections()
    channels: dict[str, Channel] = {name: registry.spec(name).build(sections[name])
                                    for name in config.enabled_channels if name != "console" or interactive}
    # none enabled, and no enabled capability brings one of its own (the API, the web chat)
    if not channels and not any(spec.channels and spec.enabled(config) for spec in capabilities.specs()):
        raise ConfigError("channels", "no channel to start", "enable a channel, or use `chatgate chat`")
    return channels


async def _serve(config: Config) -> int:
    """`chatgate run`: serve until SIGINT or SIGTERM, then shut down within SHUTDOWN_GRACE."""
    from bot.app import App

    channels = _channels(config, interactive=sys.stdin.isatty())
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    app = App(config, channels)
    try:
        await app.__aenter__()  # closes what it opened if it does not finish
    except asyncio.CancelledError:  # SIGTERM while starting (e.g. during recovery): a clean stop
        log.info("stopped while starting")
        return 0
    log.info("chatgate running: agent=%s model=%s channels=%s", config.agent.id, config.agent.model,
             ",".join(app.channels))
    gc.freeze()  # what start-up built lives as long as the process: the collector's passes skip it
    gc.enable()
    code = 0
    try:
        await _first_closed(app.channels.values())  # normally: until a signal cancels us (capabilities' too)
    except asyncio.CancelledError:
        log.info("shutting down")
    except ChatgateError as exc:
        log.error("%s", exc)
        print(f"chatgate: {exc}", file=sys.stderr)
        code = 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await _close(app)
    return code


async def _first_closed(channels: Iterable[Channel]) -> None:
    """Wait until one channel stops on its own; re-raise why it stopped."""
    waiters = [asyncio.create_task(c.wait_closed()) for c in channels]
    try:
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        await cancel_all(waiters)


async def _chat(config: Config) -> int:
    """`chatgate chat`: the terminal channel alone; Ctrl-C stops an answer, Ctrl-D leaves."""
    from bot.app import App
    from bot.channels import Interrupts, registry

    console = registry.spec("console").build(config.channel_sections()["console"])
    loop = asyncio.get_running_loop()
    if isinstance(console, Interrupts):  # Ctrl-C stops the answer, not the program
        loop.add_signal_handler(signal.SIGINT, console.interrupt)
    app = App(config, {"console": console})
    await app.__aenter__()
    try:
        await console.wait_closed()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        print(file=sys.stdout)
        await _close(app)
    return 0


async def _traces(config: Config, session: str | None, last: int) -> int:
    from bot.tracing import format_traces

    if no_database(config):
        return 0
    async with store_of(config) as store:
        print(format_traces(await store.traces(session, last)))
    return 0


async def _sessions(config: Config, last: int, archived: bool) -> int:
    from datetime import datetime

    from bot.tracing import strip_controls as clean  # titles are a model's words about strangers' text

    if no_database(config):
        return 0
    async with store_of(config) as store:
        found = await store.titled_sessions(last, archived=archived)
    for s in found:
        when = datetime.fromtimestamp(s.last_at or s.created_at).strftime("%Y-%m-%d %H:%M")
        model = f"  [{clean(s.model)}]" if s.model else ""
        gone = "  (archived)" if s.archived_at is not None else ""
        print(f"{when}  {clean(s.key)}{model}{gone}  {clean(s.title or '(untitled)')}")
    if not found:
        print("no sessions yet")
    return 0


async def _pairing(config: Config, args: argparse.Namespace) -> int:
    import time

    from bot.tracing import strip_controls as clean  # names and ids come from strangers

    async with store_of(config) as store:
        now = time.time()
        if args.action == "list":
            pending = await store.pending_pairings(now)
            approved = await store.approved_senders()
            print("pending:" if pending else "pending: none")
            for p in pending:
                minutes = max(0, int((p.expires_at - now) // 60))
                print(f"  {p.code}  {clean(p.platform)}:{clean(p.user_id)}  {clean(p.user_name)}  "
                      f"(expires in {minutes} min)")
            print("approved:" if approved else "approved: none")
            for a in approved:
                print(f"  {clean(a.platform)}:{clean(a.user_id)}  {clean(a.name)}")
            return 0
        if args.action == "approve":
            approved_code = await store.approve_pairing(args.code, now)
            if approved_code is None:
                print(f"chatgate: no pending code {args.code!r} (unknown or expired); see `chatgate pairing list`",
                      file=sys.stderr)
                return 1
            print(f"approved {clean(approved_code.platform)}:{clean(approved_code.user_id)} "
                  f"({clean(approved_code.user_name)})")
            return 0
        platform, _, user_id = args.sender.partition(":")
        if not user_id or not await store.revoke_sender(platform, user_id):
            print(f"chatgate: {args.sender!r} is not an approved sender; see `chatgate pairing list`",
                  file=sys.stderr)
            return 1
        print(f"revoked {args.sender}")
        return 0


async def _close(app: App) -> None:
    try:
        await asyncio.wait_for(app.__aexit__(None, None, None), SHUTDOWN_GRACE)
    except TimeoutError:
        log.warning("shutdown took longer than %.0f s; exiting anyway", SHUTDOWN_GRACE)
