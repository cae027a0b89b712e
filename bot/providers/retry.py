"""The one retry policy of every provider.

An attempt that fails with a ``TransientError`` (429, 529, 5xx, connection, timeout)
before it yielded anything is tried again, up to ``max_retries`` times: the wait is the
server's ``Retry-After`` when it gave one, else exponential backoff with full jitter.
A ``Retry-After`` longer than ``retry_after_cap`` is not waited for: the user is told the
provider is busy at once. Once an event has reached the caller nothing is retried (the
caller may already have shown text); a later failure is a ``ProviderUnavailableError``.
The audio SDK's own retries are off (``max_retries=0``): this module owns the policy.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass

from bot.backoff import Backoff
from bot.errors import ProviderBusyError, ProviderError, ProviderUnavailableError
from bot.providers.base import OnRetry, RetryInfo, StreamEvent
from bot.providers.failures import BUSY_STATUSES, TransientError

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 2
    retry_after_cap: float = 60.0  # seconds; a server asking for more gets ProviderBusyError
    base_delay: float = 1.0
    factor: float = 2.0
    max_delay: float = 30.0

    def backoff(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Full jitter: uniform in [0, min(max_delay, base * factor ** (retry - 1))]."""
        return Backoff(self.base_delay, self.factor, self.max_delay).delay(retry, rand)

    def delay_for(self, err: TransientError, retries_done: int,
                  rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before the next attempt, or raise the error the user gets."""
        if err.retry_after is not None and err.retry_after > self.retry_after_cap:
            raise ProviderBusyError(
                f"{err.provider}: {err.reason}; server asked to wait {err.retry_after:.0f}s, "
                f"more than the {self.retry_after_cap:.0f}s cap" + (f": {err.detail}" if err.detail else ""),
                user_message=busy_message(err.retry_after),
                status=err.status,
                provider=err.provider,
            )
        if retries_done >= self.max_retries:
            raise exhausted(err, retries_done)
        if err.retry_after is not None:
            return err.retry_after
        return self.backoff(retries_done + 1, rand)


def busy_message(wait: float) -> str:
    minutes = round(wait / 60)
    if minutes >= 90:
        when = f"about {round(wait / 3600)} hours"
    elif minutes >= 2:
        when = f"about {minutes} minutes"
    else:
        when = "a minute or two"
    return f"The language model is busy right now; please try again in {when}."


def exhausted(err: TransientError, retries: int) -> ProviderError:
    """The error for a transient failure we gave up on."""
    tries = f"{retries} retr{'y' if retries == 1 else 'ies'}"
    detail = f"{err.provider}: {err.reason} after {tries}" + (f": {err.detail}" if err.detail else "")
    if err.status in BUSY_STATUSES:  # overloaded or rate limiting us, rather than broken
        return ProviderBusyError(detail, status=err.status, provider=err.provider)
    return ProviderUnavailableError(detail, status=err.status, provider=err.provider)


async def notify(on_retry: OnRetry | None, info: RetryInfo) -> None:
    """Call ``on_retry`` (sync or async); its failure is logged, never raised."""
    if on_retry is None:
        return
    try:
        result = on_retry(info)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.warning("on_retry callback failed; retrying anyway", exc_info=True)


async def retrying(
    attempt: Callable[[], AsyncGenerator[StreamEvent, None]],
    *,
    policy: RetryPolicy,
    on_retry: OnRetry | None = None,
    sleep: Sleep = asyncio.sleep,
    rand: Callable[[], float] = random.random,
) -> AsyncGenerator[StreamEvent, None]:
    """Run ``attempt()`` until one succeeds, retrying transient failures before its
    first event. Cancelling the consumer (or ``aclose()``) stops any wait at once and
    closes the attempt in flight."""
    retries = 0
    while True:
        started = False
        try:
            async with aclosing(attempt()) as events:
                async for event in events:
                    started = True
                    yield event
            return
        except TransientError as err:
            if started:
                raise ProviderUnavailableError(
                    f"{err.provider}: stream failed after it started: {err.reason}"
                    + (f": {err.detail}" if err.detail else ""),
                    status=err.status,
                    provider=err.provider,
                ) from err
            delay = policy.delay_for(err, retries, rand)
            retries += 1
            log.warning("%s: %s; retry %d of %d in %.2fs", err.provider, err.reason, retries,
                        policy.max_retries, delay)
            await notify(on_retry, RetryInfo(attempt=retries, max_retries=policy.max_retries, delay=delay,
                                             reason=err.reason))
            await sleep(delay)
