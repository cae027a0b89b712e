"""The live checks of ``chatgate init``: the provider and key with one tiny real call, a
platform's tokens with its own ``ChannelSetup.probe``, and whether bubblewrap can build the
exec tool's sandbox here.

Each async check runs on an event loop of its own in a daemon thread while the terminal's
thread waits for it: a Ctrl-C there stops the wait at once (the thread ends with the process).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bot.errors import ConfigError

T = TypeVar("T")
CHECK_TIMEOUT = 30.0  # seconds for the provider's call


def blocking(check: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``check(*args)`` to its end on a loop of its own; raise what it raised."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        async def main() -> T:
            return await check(*args)

        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="chatgate-init-check", daemon=True).start()
    while not done.wait(0.1):  # short waits: a KeyboardInterrupt lands between them
        pass
    if "error" in box:
        raise box["error"]
    return box["value"]


async def provider(name: str, key: str, base_url: str | None, model: str) -> str:
    """A one-token answer of ``model``; what it said. Raises the provider's ``ProviderError``."""
    from contextlib import aclosing

    from bot.llm import Message
    from bot.providers import make_provider
    from bot.providers.base import ChatRequest, complete

    async with aclosing(make_provider(name, api_key=key, base_url=base_url, timeout=CHECK_TIMEOUT,
                                      max_retries=0)) as p:
        done = await complete(p, ChatRequest(model=model, system="Answer with one word.",
                                             messages=(Message.user("Say OK."),), max_tokens=16))
    return done.message.text.strip()


def sandbox() -> str | None:
    """None when bubblewrap can build the exec sandbox here, else why not with the fix (one line)."""
    from bot.tools.sandbox import ExecSettings, require_sandbox

    try:
        require_sandbox(ExecSettings())
    except ConfigError as exc:
        return f"{exc.problem} ({exc.fix})" if exc.fix else exc.problem
    return None
