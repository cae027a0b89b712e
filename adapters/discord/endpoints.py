"""The one place that points discord.py at ``api_base`` and ``gateway_url``.

discord.py 2 has no public option for either, so they are set on its classes, for the
whole process (one Discord channel per process), before the client logs in:

- REST: every request URL is ``discord.http.Route.BASE + path``, built when a ``Route`` is
  made, so ``Route.BASE`` is the route base with the API version (``.../api/v10``).
- Gateway: ``Client.connect`` opens ``DiscordWebSocket.DEFAULT_GATEWAY`` (a plain ``Client``
  never asks ``GET /gateway/bot``; only the auto-sharded client does), and an invalidated
  session falls back to it. A resume goes to the ``resume_gateway_url`` that READY names;
  Discord names one of its own hosts there, which would bypass a proxy, so ``pin_resume``
  (called on every READY) sends resumes to ``gateway_url`` too when it is not Discord's.
"""

from __future__ import annotations

from typing import Any

import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from adapters.discord.config import GATEWAY_URL


def apply(api_base: str, gateway_url: str) -> None:
    Route.BASE = api_base.rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


def pin_resume(client: Any, gateway_url: str) -> None:
    """After READY: resume through ``gateway_url`` when it is a proxy or a test server."""
    ws = getattr(client, "ws", None)
    if ws is not None and gateway_url != GATEWAY_URL:
        ws.gateway = yarl.URL(gateway_url)
