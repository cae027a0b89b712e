"""What a Slack chat shows about a run: a status line or a reaction, and a native stream.

In an assistant thread (a DM with the app, in a thread) the status line is set with
``assistant.threads.setStatus`` while the run lives and cleared when it ends. Elsewhere
the triggering message gets ``eyes`` while the run lives, replaced by ``white_check_mark``
when answered (in channels; in a DM the answer is enough) or ``x`` when it failed or was
stopped, and removed when the answer is silent. A run that ended is never shown as
working again (a late refresh is dropped).

``SlackStream`` is the port's ``LiveDraft`` on chat.startStream/appendStream/stopStream
(slack_sdk's ``chat_stream``): text is appended at most every ``every`` seconds, a fresh
stream is started before Slack's ~5-minute stream limit and when Slack says the message
is no longer streaming; on close the continuation messages are deleted and the first
one's ts is returned (the answer's first chunk replaces it). What it streams pings nobody
(``dialect.ping_free``; a token cut between two appends waits for its end). Where Slack
cannot stream (outside threads) the channel offers no stream, and the core's progress
edits a draft message instead (``bot.outbound.progress.EditDraft``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.dialect import ping_free, sendable
from adapters.slack.errors import error_code
from bot.channels import Pacer, Status, Target
from bot.messages import ChatType

log = logging.getLogger(__name__)

WORKING, DONE, FAILED = "eyes", "white_check_mark", "x"
THINKING = "is thinking…"
STATUS_REFRESH = 60.0  # Slack clears an assistant status by itself after ~2 minutes
STREAM_ROLLOVER = 270.0  # a fresh stream before Slack's ~5-minute limit
_FORGET = 4096  # ended runs remembered, so that a late WORKING does not resurrect them
_TS = re.compile(r"^\d+\.\d+$")


def is_ts(value: str | None) -> bool:
    """A Slack message ts (what a reaction can go on); not a slash command's or a button's id."""
    return value is not None and _TS.match(value) is not None


@dataclass
class _Shown:
    assistant: bool  # a status line (assistant thread) rather than a reaction
    reacted: bool = False
    set_at: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class StatusBoard:
    """Status per run (keyed by the triggering message); never a stale status or reaction."""

    def __init__(self, client: AsyncWebClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._client, self._clock = client, clock
        self._shown: dict[tuple[str, str], _Shown] = {}
        self._ended: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.live: dict[tuple[str, str | None], str] = {}  # (chat, thread) -> the run's triggering ts

    @staticmethod
    def key(to: Target) -> tuple[str, str]:
        return to.chat_id, to.reply_to or to.thread_id or ""

    def is_live(self, to: Target) -> bool:
        return self.key(to) in self._shown

    async def show(self, to: Target, status: Status) -> None:
        key = self.key(to)
        if status is Status.WORKING:
            if key in self._ended:
                return
            shown = self._shown.get(key)
            if shown is None:
                assistant = to.chat_type is ChatType.DM and to.thread_id is not None
                shown = self._shown[key] = _Shown(assistant=assistant)
                self.live[(to.chat_id, to.thread_id)] = key[1]
            async with shown.lock:
                if key not in self._ended:
                    await self._working(to, shown)
            return
        self._ended[key] = None
        while len(self._ended) > _FORGET:
            self._ended.popitem(last=False)
        shown = self._shown.pop(key, None)
        if self.live.get((to.chat_id, to.thread_id)) == key[1]:
            del self.live[(to.chat_id, to.thread_id)]
        if shown is None:  # not seen working here (a restart delivered a stored answer): undo what may be shown
            assistant = to.chat_type is ChatType.DM and to.thread_id is not None
            shown = _Shown(assistant=assistant, reacted=not assistant, set_at=1.0 if assistant else 0.0)
        async with shown.lock:
            await self._end(to, shown, status)

    async def _working(self, to: Target, shown: _Shown) -> None:
        # What is shown is recorded before the request: a refresh cancelled while its request
        # is in flight (the run ended) may still land, and the ending must then undo it.
        now = self._clock()
        if shown.assistant:
            if shown.set_at and now - shown.set_at < STATUS_REFRESH:
                return
            shown.set_at = now
            if await self._call("assistant.threads.setStatus", channel_id=to.chat_id, thread_ts=to.thread_id,
                                status=THINKING):
                return
            shown.assistant, shown.set_at = False, 0.0  # not an assistant thread (or no assistant:write): react
        if not shown.reacted and is_ts(to.reply_to):
            shown.reacted = True
            shown.reacted = await self._call("reactions.add", channel=to.chat_id, timestamp=to.reply_to,
                                             name=WORKING)

    async def _end(self, to: Target, shown: _Shown, status: Status) -> None:
        if shown.assistant and (not shown.set_at or await self._call(
                "assistant.threads.setStatus", channel_id=to.chat_id, thread_ts=to.thread_id, status="")):
            return
        if not is_ts(to.reply_to):
            return
        if shown.reacted:
            await self._call("reactions.remove", channel=to.chat_id, timestamp=to.reply_to, name=WORKING)
        final = {Status.DONE: DONE, Status.FAILED: FAILED}.get(status)
        if final == DONE and to.chat_type is ChatType.DM:
            return  # in a DM the answer itself shows it is done: no check mark on every message
        if final:
            await self._call("reactions.add", channel=to.chat_id, timestamp=to.reply_to, name=final)

    async def _call(self, method: str, **params: Any) -> bool:
        """Status is decoration: a failure is logged, never raised (the answer still goes)."""
        try:
            await self._client.api_call(method, json=params)
            return True
        except SlackApiError as exc:
            code = error_code(exc)
            if code in ("already_reacted", "no_reaction"):
                return True
            log.info("slack: %s in %s failed: %s", method, params.get("channel") or params.get("channel_id"), code)
        except (OSError, asyncio.TimeoutError) as exc:
            log.info("slack: %s failed: %s", method, exc)
        return False


class SlackStream:
    """A ``LiveDraft`` on Slack's streaming methods, rolling over to a fresh stream as needed."""

    def __init__(self, client: AsyncWebClient, *, channel: str, thread_ts: str, recipient: tuple[str, str] | None,
                 every: float = 1.0, rollover: float = STREAM_ROLLOVER,
                 clock: Callable[[], float] = time.monotonic, on_post: Callable[[], None] | None = None) -> None:
        self._client, self._channel, self._thread, self._clock = client, channel, thread_ts, clock
        self._recipient = recipient  # (user id, team id): Slack wants them in channels
        self._rollover, self._on_post = rollover, on_post
        self._stream: Any = None  # slack_sdk AsyncChatStream
        self._started = 0.0
        self._buffer = ""
        self._messages: list[str] = []
        self._lock = asyncio.Lock()
        self._pacer = Pacer(self._flush, every, clock=clock)
        self._closed = False

    async def _open(self) -> None:
        extra: dict[str, str] = {}
        if self._recipient:
            extra = {"recipient_user_id": self._recipient[0], "recipient_team_id": self._recipient[1]}
        self._stream = await self._client.chat_stream(channel=self._channel, thread_ts=self._thread,
                                                      buffer_size=1, **extra)
        self._started = self._clock()

    async def append(self, text: str) -> None:
        if self._closed or not text:
            return
        self._buffer += text
        await self._pacer.poke()

    async def _flush(self, *, last: bool = False) -> bool:
        async with self._lock:
            cut = len(self._buffer) if last else sendable(self._buffer)
            if not cut or self._closed:
                return False
            text, self._buffer = self._buffer[:cut], self._buffer[cut:]
            try:
                await self._put(ping_free(text))
            except SlackApiError as exc:
                log.info("slack: stream in %s failed: %s", self._channel, error_code(exc))
            except (OSError, asyncio.TimeoutError) as exc:
                log.info("slack: stream in %s failed: %s", self._channel, exc)
            return True

    async def _put(self, text: str) -> None:
        if self._stream is not None and self._clock() - self._started >= self._rollover:
            await self._stop_current()
        if self._stream is None:
            await self._open()
        try:
            await self._append_current(text)
        except SlackApiError as exc:
            if error_code(exc) != "message_not_in_streaming_state":
                raise
            log.info("slack: stream in %s ended on Slack's side; starting a fresh one", self._channel)
            self._stream = None
            await self._open()
            await self._append_current(text)

    async def _append_current(self, text: str) -> None:
        await self._stream.append(markdown_text=text)
        ts = self._stream.ts
        if ts and (not self._messages or self._messages[-1] != ts):
            self._messages.append(ts)
            if self._on_post:
                self._on_post()

    async def _stop_current(self) -> None:
        stream, self._stream = self._stream, None
        try:
            await stream.stop()
        except SlackApiError as exc:
            if error_code(exc) != "message_not_in_streaming_state":
                raise

    async def close(self) -> str | None:
        await self._pacer.settle()
        if self._buffer and (wait := self._pacer.left()) > 0:
            await asyncio.sleep(wait)  # the last append keeps the interval too (a stopped answer's included)
        await self._flush(last=True)
        async with self._lock:
            self._closed = True
            if self._stream is not None:
                try:
                    await self._stop_current()
                except (SlackApiError, OSError, asyncio.TimeoutError) as exc:
                    log.info("slack: stopping the stream in %s failed: %s", self._channel, exc)
            for ts in self._messages[1:]:  # continuations: the answer's chunks replace them
                try:
                    await self._client.chat_delete(channel=self._channel, ts=ts)
                except (SlackApiError, OSError, asyncio.TimeoutError) as exc:
                    log.info("slack: deleting a stream continuation in %s failed: %s", self._channel, exc)
        return self._messages[0] if self._messages else None
