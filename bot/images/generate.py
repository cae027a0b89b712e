"""``generate_image``: a picture made on request, saved in the workspace and sent to the chat.

The OpenAI-compatible images endpoint through the official SDK (``client.images.generate``);
the image is saved in the workspace's ``images/`` and sent to the chat the run serves as a
photo with its caption, through the turn runner's ``FileSender`` (as ``send_file`` sends:
stored before it is sent, once per message; a platform without photos gets it as a file).
Its price is charged to the people the run serves (split evenly, as a model call is:
``bot.limits.split``), stored in ``charges`` and told to the limits at once, so it counts in
``daily_cost_usd``. A refusal by the endpoint is told in one
sentence; cancelling the call (``/stop``) cancels the request in flight.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bot.limits import split
from bot.store.base import Charge
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool
from bot.tools.send_file import MAX_CAPTION, QUEUED, FileSender, reference
from bot.workspace import create_inside

log = logging.getLogger(__name__)

FOLDER = "images"
MAX_PROMPT = 4000
_REFUSALS = ("moderation_blocked", "content_policy_violation", "safety", "content_filter")

Charger = Callable[[str, Sequence[Charge]], Awaitable[None]]  # (run id, charges): store and count them


def image_tool(client: Any, *, model: str, size: str, quality: str, price: float, sender: FileSender,
               charge: Charger) -> Tool:
    """The ``generate_image`` tool over an ``openai.AsyncOpenAI`` client."""

    @tool(category=ToolCategory.NETWORK, name="generate_image")
    async def generate_image(ctx: ToolContext, prompt: str, caption: str = "") -> str:
        """Make a picture from a description and send it to this chat (saved in images/ too).
        Describe what to draw in detail: subject, style, composition, colours.

        Args:
            prompt: What the picture shows, in detail.
            caption: A short text shown with the picture (optional).
        """
        from openai import APIError, APIStatusError

        if not prompt.strip():
            raise ToolError("the prompt is empty; describe the picture")
        if len(prompt) > MAX_PROMPT or len(caption) > MAX_CAPTION:
            raise ToolError(f"keep the prompt under {MAX_PROMPT:,} and the caption under {MAX_CAPTION:,} characters")
        try:
            sender.upload_limit(ctx.run_id)
        except LookupError:
            raise ToolError("generate_image is not available here (only a run that serves a chat can send it)") \
                from None
        started = time.monotonic()
        try:
            answer = await client.images.generate(model=model, prompt=prompt, size=size, quality=quality, n=1)
        except APIStatusError as exc:
            if _refused(exc):
                log.info("generate_image refused by the endpoint session=%s run=%s", ctx.session_key, ctx.run_id)
                raise ToolError(f"The image service refused this request: {_sentence(exc)}") from None
            raise ToolError(f"the image service failed (HTTP {exc.status_code}): {_sentence(exc)}") from None
        except APIError as exc:
            raise ToolError(f"the image service failed: {_sentence(exc)}") from None
        data = _image_bytes(answer)
        payers = ctx.payers or ctx.people
        if price > 0 and payers:
            await charge(ctx.run_id, split(payers, 0, price))
        path = await asyncio.to_thread(_save, ctx, prompt, data)
        platform, limit = sender.upload_limit(ctx.run_id)
        ref = await asyncio.to_thread(reference, ctx.workspace, path, limit, platform)
        problem = await sender.send_file(ctx.run_id, ref, (caption or prompt[:200]).strip(), photo=True)
        log.info("generate_image %s (%d bytes, %.1f s, $%.3f) session=%s run=%s", path, len(data),
                 time.monotonic() - started, price, ctx.session_key, ctx.run_id)
        if problem == QUEUED:
            return f"the picture is saved as {path} and queued for the chat (do not send it again)"
        if problem is not None:
            raise ToolError(f"the picture is saved as {path} but was not sent: {problem}")
        return f"the picture was sent to the chat (saved as {path})"

    return generate_image


def _refused(exc: Any) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body, dict) else {}
    code = str(error.get("code") or "") + " " + str(error.get("type") or "") if isinstance(error, dict) else ""
    return exc.status_code == 400 and any(word in code or word in str(exc).lower() for word in _REFUSALS)


def _sentence(exc: Any) -> str:
    """The endpoint's message, its first sentence, short."""
    body = exc.body if isinstance(getattr(exc, "body", None), dict) else {}
    error = body.get("error", body) if isinstance(body, dict) else {}
    message = str(error.get("message") if isinstance(error, dict) and error.get("message") else exc)
    first = re.split(r"(?<=[.!?])\s", message.strip(), maxsplit=1)[0]
    return first[:300]


def _image_bytes(answer: Any) -> bytes:
    items = getattr(answer, "data", None) or []
    encoded = getattr(items[0], "b64_json", None) if items else None
    if not encoded:
        raise ToolError("the image service returned no image")
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError("the image service returned an image that cannot be read") from None


def _save(ctx: ToolContext, prompt: str, data: bytes) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", prompt.lower())[:40].strip("-") or "image"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(100):
        name = f"{FOLDER}/{stamp}-{slug}{f'-{n}' if n else ''}.png"
        try:
            fd, relative = create_inside(ctx.workspace, name, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return relative
    raise ToolError("cannot save the picture in images/")
