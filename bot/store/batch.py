"""Group commit, for both stores: the inbound rows recorded in the same moment (a poll's
updates, a burst of events) are written by one transaction, and each caller is answered once
it is committed, so no channel confirms an event before it is durable."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

R = TypeVar("R")
Write = Callable[[list[R]], Awaitable[list[int | None]]]  # rows -> each row's id, None for a redelivery
Own = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]  # the store holds the write's task


class GroupCommit(Generic[R]):
    def __init__(self, write: Write[R], own: Own) -> None:
        self._write = write
        self._own = own
        self._arriving: list[tuple[R, asyncio.Future[int | None]]] = []

    async def add(self, row: R) -> int | None:
        """Write ``row`` with whatever else arrives in this moment; its id once committed."""
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._arriving.append((row, future))
        if len(self._arriving) == 1:  # the first of a burst: one transaction will take them all
            self._own(self._flush())
        return await future

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # let the rest of a burst arrive
        arrived, self._arriving = self._arriving, []
        try:
            ids = await self._write([row for row, _ in arrived])
        except Exception as exc:  # every caller raises it: none of these events is confirmed
            for _, future in arrived:
                if not future.done():
                    future.set_exception(exc)
            return
        except asyncio.CancelledError:
            for _, future in arrived:
                future.cancel()
            raise
        for (_, future), inbound_id in zip(arrived, ids, strict=True):
            if not future.done():
                future.set_result(inbound_id)
