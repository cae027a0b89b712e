"""The retry policy and failure classification, without a server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from bot.errors import (
    ContextTooLongError,
    ProviderAuthError,
    ProviderBusyError,
    ProviderError,
    ProviderRequestError,
    ProviderUnavailableError,
)
from bot.providers.base import RetryInfo, StreamEvent, TextDelta
from bot.providers.failures import TransientError, classify_status, parse_retry_after, scrub
from bot.providers.retry import RetryPolicy, busy_message, retrying

NOW = 1_700_000_000.0


def http_date(offset: float) -> str:
    return format_datetime(datetime.fromtimestamp(NOW + offset, tz=UTC), usegmt=True)


@pytest.mark.parametrize(("headers", "seconds"), [
    ({}, None),
    ({"retry-after": "1"}, 1.0),
    ({"retry-after": "2.5"}, 2.5),
    ({"retry-after": "0"}, 0.0),
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise one wins
    ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
    ({"retry-after": http_date(90)}, 90.0),
    ({"retry-after": http_date(-30)}, 0.0),  # a date in the past: go now
    ({"retry-after": "Wed, 21 Oct 2015 07:28:00 -0000"}, 0.0),
    ({"retry-after": "-5"}, None),
    ({"retry-after": "tomorrow-ish"}, None),
])
def test_parse_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers, now=lambda: NOW) == seconds


@pytest.mark.parametrize(("status", "code", "message", "expected"), [
    (401, None, "bad key", ProviderAuthError),
    (403, None, "forbidden", ProviderAuthError),
    (400, "context_length_exceeded", "reduce the length of the messages", ContextTooLongError),
    (400, None, "prompt is too long: 210000 tokens > 200000 maximum", ContextTooLongError),
    (400, None, "input length and `max_tokens` exceed context limit: 199000 + 8192 > 200000", ContextTooLongError),
    (400, None, "This model's maximum context length is 8192 tokens", ContextTooLongError),
    (400, None, "messages: roles must alternate", ProviderRequestError),
    (404, "model_not_found", "no such model", ProviderRequestError),
    (413, None, "request entity too large", ProviderRequestError),
    (418, None, "teapot", ProviderRequestError),
    (422, None, "unprocessable", ProviderRequestError),
    (408, None, "", TransientError),
    (429, None, "", TransientError),
    (500, None, "", TransientError),
    (502, None, "", TransientError),
    (503, None, "", TransientError),
    (504, None, "", TransientError),
    (529, None, "", TransientError),
    (302, None, "moved", ProviderError),
])
def test_classify_status(status: int, code: str | None, message: str, expected: type[Exception]) -> None:
    result = classify_status(status, message, provider="p", code=code, retry_after=None)
    assert type(result) is expected
    if isinstance(result, ProviderError):
        assert result.status == status and result.provider == "p"
        assert message in str(result) and (not message or message not in result.user_message)


def test_not_found_tells_the_owner_what_to_check() -> None:
    err = classify_status(404, "The model `gpt-9` does not exist", provider="openai")
    assert isinstance(err, ProviderRequestError) and "model name and base URL" in err.user_message


def test_scrub_removes_the_key_and_shortens() -> None:
    assert scrub("Incorrect API key provided: sk-abc123", "sk-abc123") == "Incorrect API key provided: ***"
    assert len(scrub("x" * 1000, None)) == 300
    assert scrub("two\n  lines", "") == "two lines"
    assert scrub("a key error", "k") == "a key error"  # a placeholder, not a secret


def test_backoff_is_exponential_with_full_jitter_and_a_ceiling() -> None:
    policy = RetryPolicy(max_retries=10)
    assert [policy.backoff(n, rand=lambda: 1.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert policy.backoff(3, rand=lambda: 0.0) == 0.0
    assert policy.backoff(3, rand=lambda: 0.5) == 2.0


def test_delay_prefers_retry_after_then_backoff() -> None:
    policy = RetryPolicy(max_retries=2, retry_after_cap=60)
    assert policy.delay_for(TransientError("429", provider="p", status=429, retry_after=7), 0) == 7
    assert policy.delay_for(TransientError("500", provider="p", status=500), 1, rand=lambda: 1.0) == 2.0


@pytest.mark.parametrize(("status", "error"), [(429, ProviderBusyError), (529, ProviderBusyError),
                                               (500, ProviderUnavailableError), (None, ProviderUnavailableError)])
def test_exhausted_retries(status: int | None, error: type[ProviderError]) -> None:
    with pytest.raises(error, match="after 2 retries"):
        RetryPolicy(max_retries=2).delay_for(TransientError("x", provider="p", status=status), 2)


def test_retry_after_above_cap_is_busy_even_with_retries_left() -> None:
    with pytest.raises(ProviderBusyError) as caught:
        RetryPolicy(max_retries=5, retry_after_cap=60).delay_for(
            TransientError("503 server error", provider="p", status=503, retry_after=600), 0)
    assert caught.value.user_message == "The language model is busy right now; please try again in about 10 minutes."


@pytest.mark.parametrize(("wait", "phrase"), [(61, "a minute or two"), (150, "about 2 minutes"),
                                              (7200, "about 2 hours")])
def test_busy_message(wait: float, phrase: str) -> None:
    assert phrase in busy_message(wait)


# ----------------------------------------------------------------------------- the loop


Attempt = Callable[[], AsyncGenerator[StreamEvent, None]]


def attempts(*outcomes: Exception | str) -> tuple[list[int], Attempt]:
    """An attempt factory: each call plays the next outcome (an error, or a text answer)."""
    calls: list[int] = []

    def attempt() -> AsyncGenerator[StreamEvent, None]:
        outcome = outcomes[len(calls)]
        calls.append(1)

        async def run() -> AsyncGenerator[StreamEvent, None]:
            if isinstance(outcome, Exception):
                raise outcome
            for word in outcome.split():
                yield TextDelta(word)

        return run()

    return calls, attempt


async def drain(stream: AsyncGenerator[StreamEvent, None]) -> list[StreamEvent]:
    async with aclosing(stream) as events:
        return [e async for e in events]


async def test_transient_failures_are_retried_with_injected_sleep() -> None:
    slept: list[float] = []
    infos: list[RetryInfo] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    calls, attempt = attempts(TransientError("429 rate limited", provider="p", status=429, retry_after=3),
                              TransientError("timeout", provider="p"), "ok then")
    events = await drain(retrying(attempt, policy=RetryPolicy(max_retries=2), on_retry=infos.append,
                                  sleep=sleep, rand=lambda: 0.5))
    assert events == [TextDelta("ok"), TextDelta("then")]
    assert slept == [3, 1.0] and len(calls) == 3
    assert [(i.attempt, i.delay, i.reason) for i in infos] == [(1, 3, "429 rate limited"), (2, 1.0, "timeout")]


async def test_final_errors_are_not_retried() -> None:
    calls, attempt = attempts(ProviderAuthError("401"), "never")
    with pytest.raises(ProviderAuthError):
        await drain(retrying(attempt, policy=RetryPolicy(max_retries=3)))
    assert len(calls) == 1


async def test_no_retry_after_the_first_event() -> None:
    calls: list[int] = []

    def attempt() -> AsyncGenerator[StreamEvent, None]:
        calls.append(1)

        async def run() -> AsyncGenerator[StreamEvent, None]:
            yield TextDelta("partial")
            raise TransientError("connection error", provider="p")

        return run()

    seen: list[StreamEvent] = []
    with pytest.raises(ProviderUnavailableError, match="after it started"):
        async with aclosing(retrying(attempt, policy=RetryPolicy(max_retries=3))) as events:
            async for event in events:
                seen.append(event)
    assert seen == [TextDelta("partial")] and len(calls) == 1


async def test_cancelling_during_backoff_is_immediate() -> None:
    _, attempt = attempts(TransientError("500", provider="p", status=500, retry_after=30), "never")
    task = asyncio.create_task(drain(retrying(attempt, policy=RetryPolicy(max_retries=1))))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5  # not the 30 s the backoff would have waited
