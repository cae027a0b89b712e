"""What a chat shows while one run lives, as one owned async context manager.

    async with Progress(channel, target, streaming="edit") as progress:
        progress.feed(event)              # from the run's events
        draft_id = await progress.settle()

While it lives, ``Status.WORKING`` is refreshed every ``shape.status_every`` seconds
(Telegram's "typing…" expires after ~5 s). With ``streaming: edit`` the text streamed so
far is shown in one draft message, sent once and edited at most every
``shape.edit_every`` seconds; with ``native`` it goes to the platform's own streaming
message (the channel is a ``Streams``), or, where the platform has none for this chat
(``stream`` gives None), to an ``EditDraft``. A channel that ``Notes`` gets a line per
tool call and retry. Both capabilities are taken once, when the progress is made.

A draft shows only what the final answer could show: the text passes the sanitizer (no
``<think>``, tool markup or echoed system lines, and no half-written tag at its end) after
the run's NO_REPLY hold-back. ``settle`` stops everything and returns the draft's id,
which the answer's first chunk then replaces; leaving the block, by any way (an
exception, a cancellation), stops it too.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable

from bot.agent.events import EventKind, RunEvent
from bot.channels import Channel, LiveDraft, Notes, Pacer, SendFailed, Status, Streaming, Streams
from bot.messages import Target
from bot.outbound.split import render_chunks
from bot.text.sanitize import sanitize

log = logging.getLogger(__name__)

_OPEN_TAG_AT_END = re.compile(r"<[^<>\n]*\Z")


def draft_text(raw: str) -> str:
    """What a draft may show of the raw streamed text: sanitized, no half-open tag at its end."""
    return sanitize(_OPEN_TAG_AT_END.sub("", raw))


class Progress:
    def __init__(self, channel: Channel, target: Target, streaming: Streaming = "off", *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._channel = channel
        self._target = target
        self._streams = channel if isinstance(channel, Streams) else None
        self._notes = channel if isinstance(channel, Notes) else None
        self._streaming: Streaming = "edit" if streaming == "native" and self._streams is None else streaming
        self._clock = clock
        self._raw = ""
        self._shown = ""  # what the draft shows now (rendered chunk, or streamed text when native)
        self._draft_id: str | None = None
        self._live: LiveDraft | None = None
        self._last_edit = float("-inf")
        self._dirty = asyncio.Event()
        self._busy = False  # a draft request is in flight
        self._status: asyncio.Task[None] | None = None
        self._drafts: asyncio.Task[None] | None = None
        self._settled = False
        self._noting: set[asyncio.Future[None]] = set()

    async def __aenter__(self) -> Progress:
        self._status = asyncio.create_task(self._keep_status(), name=f"status {self._target.chat_id}")
        if self._streaming != "off":
            self._drafts = asyncio.create_task(self._keep_draft(), name=f"draft {self._target.chat_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.settle()

    def feed(self, event: RunEvent) -> None:
        if self._settled:
            return
        if self._notes is not None and (line := _note_line(event)):
            self._noting.add(task := asyncio.ensure_future(self._notes.note(self._target, line)))
            task.add_done_callback(self._noting.discard)
        if self._drafts is None:
            return
        if event.kind is EventKind.DELTA:
            self._raw += event.text
            self._dirty.set()
        elif event.kind is EventKind.TOOL_CALL and self._streaming == "edit":
            self._raw = ""  # the next step's text replaces this one's in the draft

    async def settle(self) -> str | None:
        """Stop the status and the draft (a draft request in flight lands first); the draft's id."""
        if self._settled:
            return self._draft_id
        self._settled = True
        if self._status is not None:
            self._status.cancel()
        if self._drafts is not None:
            if self._busy:
                self._dirty.set()  # the loop sees it is settled once its request lands
            else:
                self._drafts.cancel()
            await asyncio.wait({self._drafts})
        if self._streaming == "native" and self._raw:
            try:
                await self._append(draft_text(self._raw))  # the rest of the text, then the stream ends
            except SendFailed as exc:
                log.info("the live draft's last update failed: %s", exc)
        if self._live is not None:
            try:
                self._draft_id = await self._live.close()
            except SendFailed as exc:
                log.info("closing the live draft failed: %s", exc)
        elif self._draft_id is not None:  # the final edit must respect the edit interval too
            await asyncio.sleep(max(0.0, self._last_edit + self._channel.shape.edit_every - self._clock()))
        return self._draft_id

    async def _keep_status(self) -> None:
        every = self._channel.shape.status_every
        while True:
            try:
                await self._channel.status(self._target, Status.WORKING)
            except Exception as exc:  # noqa: BLE001 - cosmetic: never fails a run
                log.debug("status update failed: %s", exc)
            await asyncio.sleep(every)

    async def _keep_draft(self) -> None:
        every = self._channel.shape.edit_every
        while True:
            await self._dirty.wait()
            if self._settled:
                return
            if self._streaming == "edit" and self._draft_id is not None:
                await asyncio.sleep(max(0.0, self._last_edit + every - self._clock()))
            self._dirty.clear()
            text = draft_text(self._raw)
            self._busy = True
            try:
                if self._streaming == "native":
                    await self._append(text)
                else:
                    await self._edit(text)
            except SendFailed as exc:
                log.info("draft update failed (%s); streaming stops for this answer", exc)
                return
            finally:
                self._busy = False

    async def _append(self, text: str) -> None:
        if not text.startswith(self._shown) or len(text) == len(self._shown):
            return  # the sanitizer took back text already streamed: the final answer corrects it
        if self._live is None:
            assert self._streams is not None
            live = await self._streams.stream(self._target)
            self._live = live if live is not None else EditDraft(self._channel, self._target, clock=self._clock)
        await self._live.append(text[len(self._shown):])
        self._shown = text

    async def _edit(self, text: str) -> None:
        chunks = render_chunks(text, self._channel.dialect, self._channel.shape) if text.strip() else []
        if not chunks or chunks[0] == self._shown:
            return
        if self._draft_id is None:
            self._draft_id = await self._channel.send(self._target, chunks[0])
        else:
            await self._channel.edit(self._target, self._draft_id, chunks[0])
        self._shown, self._last_edit = chunks[0], self._clock()


class EditDraft:
    """A ``LiveDraft`` where a platform has no native stream for a chat (Slack outside
    threads): one message, sent once and edited at most every ``shape.edit_every`` seconds
    with the first chunk of the Markdown so far, rendered in the channel's dialect. A failed
    request leaves the message as it is; the answer replaces it anyway."""

    def __init__(self, channel: Channel, to: Target, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._channel, self._to = channel, to
        self._raw = ""
        self._shown = ""
        self._id: str | None = None
        self._lock = asyncio.Lock()
        self._pacer = Pacer(self._flush, channel.shape.edit_every, clock=clock)
        self._broken = False
        self._closed = False

    async def append(self, text: str) -> None:
        self._raw += text
        await self._pacer.poke()

    async def _flush(self) -> bool:
        async with self._lock:
            chunks = render_chunks(self._raw, self._channel.dialect, self._channel.shape) if self._raw.strip() else []
            if self._broken or self._closed or not chunks or chunks[0] == self._shown:
                return False
            try:
                if self._id is None:
                    self._id = await self._channel.send(self._to, chunks[0])
                else:
                    await self._channel.edit(self._to, self._id, chunks[0])
            except SendFailed as exc:
                log.info("draft in %s failed (%s); it stays as it is", self._to.chat_id, exc)
                self._broken = True
                return True
            self._shown = chunks[0]
            return True

    async def close(self) -> str | None:
        self._closed = True
        await self._pacer.settle()
        return self._id


def _note_line(event: RunEvent) -> str:
    """A one-line note for channels that show run activity (the terminal)."""
    if event.kind is EventKind.TOOL_CALL and event.tool is not None:
        flat = " ".join(event.tool.arguments.split())
        return f"⚙ {event.tool.name} {flat if len(flat) <= 80 else flat[:79] + '…'}"
    if event.kind is EventKind.RETRYING and event.retry is not None:
        return f"(the model did not answer ({event.retry.reason}); trying again in {event.retry.delay:.0f} s)"
    return ""
