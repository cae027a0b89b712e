"""The spec of ``chatgate init``: a subcommand and nothing that runs with the bot."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.capabilities.spec import CapabilitySpec, Core

if TYPE_CHECKING:
    from argparse import _SubParsersAction


@contextlib.asynccontextmanager
async def _open(core: Core) -> AsyncIterator[None]:
    yield None  # never enabled: nothing runs beside the bot


def cli(sub: _SubParsersAction[Any]) -> None:
    init = sub.add_parser("init", help="set up config.yaml and .env, asking and checking each answer live")
    init.add_argument("-c", "--config", default="config.yaml", help="where to write it (default ./config.yaml; "
                                                                     ".env goes beside it)")
    init.add_argument("--non-interactive", action="store_true",
                      help="no questions: from the flags below and the environment (OPENAI_API_KEY, "
                           "TELEGRAM_BOT_TOKEN, ... ; a platform's other keys as <PLATFORM>_<KEY>)")
    init.add_argument("--provider", choices=("openai", "anthropic"), help="default: openai, or anthropic when "
                                                                          "only ANTHROPIC_API_KEY is set")
    init.add_argument("--model", help="default: the provider's (CHATGATE_MODEL)")
    init.add_argument("--base-url", help="an OpenAI-compatible server, with /v1 (default: OPENAI_BASE_URL)")
    init.add_argument("--channel", action="append", default=[], metavar="PLATFORM",
                      help="a platform to enable: telegram, discord, slack, whatsapp (repeatable)")
    init.add_argument("--owner", action="append", default=[], metavar="PLATFORM:USER_ID",
                      help="the owner on a platform (repeatable); without one, strangers get pairing codes")
    init.add_argument("--exec", action="store_true", help="turn on the shell tool, in the bubblewrap sandbox")
    init.add_argument("--no-check", action="store_true", help="write without the live checks")
    init.add_argument("--force", action="store_true", help="replace an existing config.yaml")
    init.set_defaults(run=_run, no_config=True)


async def _run(config: object, args: argparse.Namespace) -> int:
    from bot.errors import ChatgateError
    from bot.setup.flow import interactive
    from bot.setup.scripted import scripted
    from bot.setup.terminal import Terminal

    path = Path(args.config)
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C ends the questions at once
    except ValueError:
        previous = None
    try:
        if args.non_interactive:
            return scripted(path, args, os.environ)
        if not sys.stdin.isatty():
            print("chatgate: init asks questions in a terminal; use --non-interactive in scripts", file=sys.stderr)
            return 2
        return interactive(path, Terminal(), os.environ)
    except KeyboardInterrupt:
        print("\nStopped: nothing was written.", file=sys.stderr)
        return 130
    except EOFError:
        print("\nStopped (end of input): nothing was written.", file=sys.stderr)
        return 130
    except ChatgateError as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


SPEC = CapabilitySpec("setup", _open, enabled=lambda config: False, cli=cli)
