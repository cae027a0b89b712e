"""How a failed LLM request is classified, whatever the vendor.

A provider turns each SDK failure into either a ``TransientError`` (worth another
attempt: 408, 429, 529, 5xx, connection errors, timeouts) or a final
``bot.errors.ProviderError``. ``bot.providers.retry`` decides what happens to the first
kind. Nothing here imports an SDK.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC

from bot.errors import (
    ChatgateError,
    ContextTooLongError,
    ProviderAuthError,
    ProviderError,
    ProviderRequestError,
    ProviderUnavailableError,
)

BUSY_STATUSES = frozenset({429, 529})
_DETAIL_LIMIT = 300

# Wordings servers use when the prompt does not fit: OpenAI (code context_length_exceeded,
# "maximum context length"), Anthropic ("prompt is too long", "exceed context limit"),
# vLLM, Ollama and llama.cpp variants.
_CONTEXT_PATTERNS = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window"
    r"|prompt is too long|exceed context limit|too many tokens|exceeds the context",
    re.IGNORECASE,
)

_NOT_FOUND_MESSAGE = (
    "The language model service does not know this model or address; "
    "the bot's owner needs to check the model name and base URL."
)


class TransientError(ChatgateError):
    """One attempt failed in a way another attempt may fix. Never leaves the retry loop."""

    def __init__(
        self,
        reason: str,
        *,
        provider: str,
        detail: str = "",
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{provider}: {reason}" + (f": {detail}" if detail else ""))
        self.reason = reason  # short, e.g. "429 rate limited"
        self.provider = provider
        self.detail = detail
        self.status = status
        self.retry_after = retry_after


def scrub(text: str, secret: str | None) -> str:
    """A server message made safe for logs and exception details: no key, short. (Keys
    under 4 characters are placeholders for keyless local servers, not secrets.)"""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


def describe_cause(err: BaseException, secret: str | None) -> str:
    """``Type: message`` of what is underneath an SDK error (e.g. the socket error), scrubbed.
    Providers raise their typed errors ``from None``: an SDK exception's text may quote a
    server body, and a traceback logged upstream must not carry the key."""
    cause = err.__cause__ or err
    text = str(cause)
    return scrub(f"{type(cause).__name__}: {text}" if text else type(cause).__name__, secret)


def error_fields(body: object, fallback: str, key: str = "code") -> tuple[str, str | None]:
    """(message, ``key``) of a server's error body: ``{"error": {...}}`` or that inner object
    (OpenAI's ``code``, Anthropic's ``type``); a text body is its own message."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            kind = inner.get(key)
            return str(inner.get("message") or fallback), str(kind) if kind is not None else None
    if isinstance(body, str) and body:
        return body, None
    return fallback, None


def looks_like_context_overflow(code: str | None, message: str) -> bool:
    return bool(_CONTEXT_PATTERNS.search(f"{code or ''} {message}"))


def classify_status(
    status: int,
    message: str,
    *,
    provider: str,
    code: str | None = None,
    retry_after: float | None = None,
) -> TransientError | ProviderError:
    """Map an HTTP error status (and the server's short message) to what to do next."""
    detail = f"{provider}: HTTP {status}" + (f": {message}" if message else "")
    if status == 408 or status in BUSY_STATUSES or 500 <= status <= 599:
        reason = {408: "request timeout", 429: "rate limited", 529: "overloaded"}.get(status, "server error")
        return TransientError(f"{status} {reason}", provider=provider, detail=message, status=status,
                              retry_after=retry_after)
    if status in (401, 403):
        return ProviderAuthError(detail, status=status, provider=provider)
    if status in (400, 413, 422) and looks_like_context_overflow(code, message):
        return ContextTooLongError(detail, status=status, provider=provider)
    if status == 404:
        return ProviderRequestError(detail, status=status, provider=provider, user_message=_NOT_FOUND_MESSAGE)
    if 400 <= status <= 499:
        return ProviderRequestError(detail, status=status, provider=provider)
    return ProviderError(detail, status=status, provider=provider)


def status_failure(status: int, body: object, headers: Mapping[str, str], provider: str, secret: str,
                   key: str = "code") -> TransientError | ProviderError:
    """An error status, read with the server's error body (``key`` names the kind of error:
    OpenAI's ``code``, Anthropic's ``type``)."""
    message, kind = error_fields(body, f"Error code: {status}", key)
    return classify_status(status, scrub(message, secret), provider=provider, code=kind,
                           retry_after=parse_retry_after(headers))


def malformed(provider: str, what: str) -> ProviderUnavailableError:
    """The server answered with something that is not the protocol we speak."""
    return ProviderUnavailableError(f"{provider}: malformed response: {what}", provider=provider)


def parse_retry_after(headers: Mapping[str, str], *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, else ``retry-after`` as
    seconds or an HTTP date. ``None`` when absent or unreadable. Header names lower-case
    (httpx headers are case-insensitive anyway)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are always UTC
            when = when.replace(tzinfo=UTC)
        return max(0.0, when.timestamp() - now())
    return seconds if seconds >= 0 else None


def refused_connection(err: BaseException) -> bool:
    """True when a "timeout" was really a refused or failed connect. The aiohttp transport
    reports every failed connect as a connect timeout; the cause chain says what it was."""
    seen: BaseException | None = err
    for _ in range(8):
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if seen is None:
            return False
        if isinstance(seen, ConnectionError):
            return True
    return False

