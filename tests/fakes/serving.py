"""Starting a fake server: what every fake in this folder does the same way."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start ``app`` on ``host:port`` (0 picks a free port); the runner and the port it got.

    ``handler_cancellation``: a client that goes away cancels its handler, which is how the
    fakes see a disconnect while a reply hangs between chunks, or a long poll is left."""
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, runner.addresses[0][1]
