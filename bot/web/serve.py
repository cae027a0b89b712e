"""Listening on a ``host:port`` of the config, the one way every server of the bot does it (the
dashboard, the ops probes, the API, the web chat): a port in use, or an address this machine
does not have, stops start-up with one line naming the key."""

from __future__ import annotations

import ssl

from aiohttp import web

from bot.errors import ConfigError


async def listen(runner: web.AppRunner, host: str, port: int, *, key: str, shown: str,
                 tls: ssl.SSLContext | None = None) -> int:
    """Start ``runner`` (set up here) on ``host:port``; the port it got (``0`` picks a free one).
    On failure the runner is cleaned up and ``ConfigError(key)`` says why."""
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=tls).start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(key, f"cannot listen on {shown}: {exc.strerror or exc}",
                          "choose another port, or stop what uses it") from None
    return int(runner.addresses[0][1])
