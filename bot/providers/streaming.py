"""What the streaming providers share: the retry policy, the client's lifetime, and one
attempt — open the stream of events (``bot.providers.wire``), feed every item to an
assembler, map failures.

A subclass says how to build its client and request body, where to post it, how to
assemble the vendor's events, and what the vendor's error bodies mean.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Iterable
from typing import Any, Protocol

from bot.errors import ProviderError
from bot.providers.base import ChatRequest, Completed, OnRetry, StreamEvent
from bot.providers.failures import TransientError, describe_cause, malformed, status_failure
from bot.providers.retry import RetryPolicy, retrying
from bot.providers.wire import StatusError, TimedOut, Unreachable, Wire, WireError

log = logging.getLogger(__name__)

MALFORMED = (ValueError, KeyError, TypeError, AttributeError)  # a stream item we cannot read


def string_field(event: dict[str, Any], key: str) -> str:
    """``event[key]``, which must be text (a stream item we cannot read raises one of ``MALFORMED``)."""
    value = event[key]
    if not isinstance(value, str):
        raise TypeError(f"{event.get('type')} {key} is {type(value).__name__}, not a string")
    return value


class Assembler(Protocol):
    def feed(self, item: dict[str, Any]) -> Iterable[StreamEvent]: ...
    def finish(self, provider: str) -> Completed: ...


class StreamingProvider:
    name: str
    path: str  # where the request is posted, under the base URL
    error_key = "code"  # the field of an error body that names the kind of error

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        retry_after_cap: float = 60.0,
        policy: RetryPolicy | None = None,
    ) -> None:
        self._secret = api_key
        self._policy = policy or RetryPolicy(max_retries=max_retries, retry_after_cap=retry_after_cap)
        self._client = self._make_client(api_key, base_url, timeout)

    async def __aenter__(self) -> StreamingProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.close()

    def stream(self, request: ChatRequest, *, on_retry: OnRetry | None = None) -> AsyncGenerator[StreamEvent, None]:
        params = self._params(request)
        return retrying(lambda: self._attempt(params, request.model), policy=self._policy, on_retry=on_retry)

    async def _attempt(self, params: dict[str, Any], model: str) -> AsyncGenerator[StreamEvent, None]:
        try:
            stream = await self._client.events(self.path, params)
        except WireError as err:
            raise self._failure(err) from None  # see failures.describe_cause
        async with stream:  # closes the HTTP response on cancel, aclose or error
            assembler = self._assembler(model)
            try:
                async for item in stream:
                    if not isinstance(item, dict):
                        raise TypeError(f"a stream item is {type(item).__name__}, not an object")
                    for event in assembler.feed(item):
                        yield event
            except WireError as err:
                raise self._failure(err) from None
            except MALFORMED as err:
                log.warning("%s: unreadable stream item", self.name, exc_info=True)
                raise malformed(self.name, type(err).__name__) from err
            yield assembler.finish(self.name)

    # -- what each vendor supplies ---------------------------------------------------------

    def _make_client(self, api_key: str, base_url: str | None, timeout: float) -> Wire:
        raise NotImplementedError

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _assembler(self, model: str) -> Assembler:
        raise NotImplementedError

    def _failure(self, err: WireError) -> TransientError | ProviderError:
        """An error status read with its body (an error inside the stream is the subclass's); a
        timeout or a broken connection is worth another attempt, anything else is final."""
        if isinstance(err, StatusError):
            return status_failure(err.status, err.body, err.headers, self.name, self._secret, self.error_key)
        if isinstance(err, TimedOut):
            return TransientError("timeout", provider=self.name)
        if isinstance(err, Unreachable):
            return TransientError("connection error", provider=self.name, detail=describe_cause(err, self._secret))
        return ProviderError(f"{self.name}: {describe_cause(err, self._secret)}", provider=self.name)
