"""Durable delivery: every answer owed to a chat is sent once, in order, across failed
sends, restarts and crashes.

An answer is stored (with its turn, or alone for a notice) before ``push`` hands it
here. One worker per chat sends its answers in order, chunk by chunk; each chunk is
recorded when the platform returns its id, and the last one answers the inbound
messages (``AnswerStore.chunk_sent``). A failed send is retried with the project's
backoff, honouring the platform's ``retry_after``, for up to ``retry_for`` seconds after
the answer's first failure; a permanent failure (blocked, chat gone, malformed) or the
end of that window gives the answer up (logged; its messages count as answered, so the
model is never asked again). Workers run outside the runs' concurrency slots: a long
flood wait holds only its own chat. ``resume`` on start-up sends what a previous process
stored but did not deliver, from the first undelivered chunk: nothing is regenerated.

A chunk that sends a workspace file by reference (``FileRef``, the ``send_file`` tool) has
its bytes read when it is sent, inside the workspace and never through a link; a file that
changed or went since it was stored is not sent at all (the answer is given up), and whoever
waits for the answer (``outcome``) is told why. With several instances, ``claim`` decides which
one sends an answer (the one that stored it, or the one that took over from a dead one): an
answer claimed by a live other is skipped.

A platform may say later that a chunk it took was not delivered after all (``undelivered``,
WhatsApp's failed status): the chunk comes back into the ledger as an answer of its own, its id
the chunk's, so a report heard twice, or after a restart, or by another instance, is one answer.
It is owed again when retrying may help (once: a resent chunk reported again is given up), else
stored given up, with the reason in the log (the dashboard lists it).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from bot import observe
from bot.backoff import Backoff
from bot.channels import Channel, SendFailed, SendsPhoto, SendsVoice, Status, Undelivered
from bot.messages import Answer, Chunk, FileRef
from bot.observe import Signal
from bot.store.base import AnswerStore
from bot.tasks import cancel_all
from bot.workspace import read_inside

log = logging.getLogger(__name__)

Claim = Callable[[Answer], Awaitable[bool]]  # several instances: is this one to send it?
AGAIN = "-again-"  # in the id of a chunk owed again after its platform reported it undelivered


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    retry_for: float = 600.0  # seconds an answer is retried after its first failed send
    backoff: Backoff = Backoff(base=1.0, factor=2.0, cap=30.0)


class Delivery:
    def __init__(self, store: AnswerStore, channels: Mapping[str, Channel],
                 settings: DeliverySettings = DeliverySettings(), *, claim: Claim | None = None) -> None:
        self._store = store
        self._channels = channels
        self._settings = settings
        self._claim = claim
        self._queues: dict[tuple[str, str], deque[Answer]] = {}
        self._workers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._owed: set[str] = set()  # ids of the answers queued or being sent
        self._woken: dict[str, asyncio.Event] = {}  # platform -> set when a send goes through again
        self._idle = asyncio.Event()
        self._idle.set()
        self._waiting: dict[str, list[asyncio.Future[str | None]]] = {}  # answer id -> told how it ended
        self._landing: dict[str, tuple[Answer, int]] = {}  # message id -> its chunk, until recorded as sent

    def outcome(self, answer_id: str) -> asyncio.Future[str | None]:
        """Done when the answer ``answer_id`` has been delivered (None) or given up (why), in
        this process; ask before pushing it, so that its end cannot be missed."""
        done: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(answer_id, []).append(done)
        return done

    def forget(self, answer_id: str, waiter: asyncio.Future[str | None]) -> None:
        """Stop telling ``waiter`` (it stopped waiting)."""
        waiters = self._waiting.get(answer_id, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self._waiting.pop(answer_id, None)

    def push(self, answer: Answer) -> None:
        """Send a stored answer after the chat's earlier ones."""
        if answer.id in self._owed:  # queued already (resumed at start, and pushed again): sent once
            log.info("answer %s is queued already", answer.id)
            return
        self._owed.add(answer.id)
        observe.signal(Signal.DELIVERY_OWED, platform=answer.platform, ref=answer.id)
        key = (answer.platform, answer.target.chat_id)
        self._queues.setdefault(key, deque()).append(answer)
        if key not in self._workers:
            self._idle.clear()
            self._workers[key] = asyncio.create_task(self._work(key), name=f"delivery {key[0]}:{key[1]}")

    async def undelivered(self, platform: str, report: Undelivered) -> bool:
        """A chunk ``platform`` took and then reported undelivered (``ReportsUndelivered``), back in the
        ledger: False when no stored answer sent that message (a question, a reaction)."""
        found = self._landing.get(report.message_id) or await self._store.sent_as(platform, report.message_id)
        if found is None:
            return False
        answer, index = found
        again = Answer(f"{answer.id}{AGAIN}{index}", platform,
                       replace(answer.target, reply_to=None) if index else answer.target, (answer.chunks[index],))
        await self._store.store_answer(again)
        if again.id in self._owed or await self._store.answer_state(again.id) != "owed":
            return True  # the same report again: taken already
        where = f"{answer.id} chunk {index + 1} to {platform}:{answer.target.chat_id}"
        if report.retry and AGAIN not in answer.id:
            log.warning("%s was not delivered after all (%s); owed again as %s", where, report.why, again.id)
            self.push(again)
        else:
            log.error("giving up on %s: not delivered after all (%s)", where, report.why)
            await self._store.give_up(again)
        return True

    async def resume(self) -> None:
        """Queue what a previous process stored but did not deliver."""
        for answer in await self._store.undelivered():
            if answer.platform not in self._channels:
                log.warning("answer %s is for %s, which is not enabled; it waits", answer.id, answer.platform)
                continue
            log.info("resuming delivery of %s (%d of %d chunks sent)", answer.id, answer.sent, len(answer.chunks))
            self.push(answer)

    async def wait_idle(self) -> None:
        """Until every queued answer is delivered or given up (tests, benchmarks)."""
        await self._idle.wait()

    async def aclose(self) -> None:
        """Stop sending; what was not delivered stays stored for the next start."""
        await cancel_all(list(self._workers.values()))

    async def _work(self, key: tuple[str, str]) -> None:
        queue = self._queues[key]
        try:
            while queue:
                answer = queue[0]
                ended: str | None = "it could not be sent"
                try:
                    if self._claim is None or await self._claim(answer):
                        began = time.monotonic()
                        ended = await self._deliver(answer)
                        observe.signal(Signal.DELIVERED if ended is None else Signal.GIVEN_UP,
                                       platform=answer.platform, value=time.monotonic() - began, ref=answer.id)
                    else:
                        log.info("answer %s is sent by another instance", answer.id)
                        ended = None  # it is the other's to send
                except Exception:  # a bug or a store failure: log once, keep the chat's queue going
                    log.exception("delivery of %s failed; it is retried at the next start", answer.id)
                for waiter in self._waiting.pop(answer.id, ()):
                    if not waiter.done():
                        waiter.set_result(ended)
                queue.popleft()
                self._owed.discard(answer.id)
        finally:
            del self._workers[key]
            if not queue:
                self._queues.pop(key, None)
            if not self._workers:
                self._idle.set()

    async def _deliver(self, answer: Answer) -> str | None:
        """Send the answer's chunks from the first unsent one: None when all went, else why it was given up."""
        channel = self._channels[answer.platform]
        first_failure: float | None = None
        index = answer.sent
        retries = 0
        while index < len(answer.chunks):
            chunk = answer.chunks[index]
            try:
                message_id = await self._send(channel, answer, index, chunk)
            except SendFailed as exc:
                now = time.monotonic()
                first_failure = now if first_failure is None else first_failure
                retries += 1
                if exc.permanent or now - first_failure >= self._settings.retry_for:
                    log.error("giving up on %s chunk %d of %d to %s:%s after %d tries: %s", answer.id, index + 1,
                              len(answer.chunks), answer.platform, answer.target.chat_id, retries, exc)
                    await self._store.give_up(answer)
                    await quietly(channel.status(answer.target, Status.FAILED))
                    return str(exc)
                wait = self._settings.backoff.wait(retries, exc.retry_after)
                wait = min(wait, max(0.0, first_failure + self._settings.retry_for - now))
                log.warning("send of %s chunk %d failed (%s); retry %d in %.1f s", answer.id, index + 1, exc,
                            retries, wait)
                if exc.retry_after is None:  # an outage: over for every chat once one send goes through
                    await self._nap(answer.platform, wait)
                else:  # a flood wait is the chat's own: honour it
                    await asyncio.sleep(wait)
                continue
            if (woken := self._woken.pop(answer.platform, None)) is not None:
                woken.set()
            if message_id:  # a report on it may come before it is recorded
                self._landing[message_id] = (answer, index)
            try:
                await self._store.chunk_sent(answer, index, message_id)
            finally:
                self._landing.pop(message_id or "", None)
            index += 1
            retries = 0
        await quietly(channel.status(answer.target, Status.FAILED if answer.failed else Status.DONE))
        return None

    async def _nap(self, platform: str, seconds: float) -> None:
        """Wait out a backoff, cut short when a send to the same platform goes through: after
        an outage every waiting chat is sent at once, not each at the end of its own backoff."""
        woken = self._woken.setdefault(platform, asyncio.Event())
        nap = asyncio.ensure_future(asyncio.sleep(seconds))
        wake = asyncio.ensure_future(woken.wait())
        try:
            await asyncio.wait((nap, wake), return_when=asyncio.FIRST_COMPLETED)
        finally:
            nap.cancel()
            wake.cancel()

    async def _send(self, channel: Channel, answer: Answer, index: int, chunk: Chunk) -> str | None:
        if chunk.file_name is not None:
            data = chunk.file_data or b""
            if chunk.file_ref is not None:
                data = await asyncio.to_thread(read_ref, chunk.file_ref)
            if chunk.voice and isinstance(channel, SendsVoice):
                return await channel.send_voice(answer.target, chunk.file_name, data, chunk.text)
            if chunk.photo and isinstance(channel, SendsPhoto):
                return await channel.send_photo(answer.target, chunk.file_name, data, chunk.text)
            return await channel.send_file(answer.target, chunk.file_name, data, chunk.text)
        if index == 0 and answer.draft_id is not None:  # the streaming draft becomes the first chunk
            try:
                await channel.edit(answer.target, answer.draft_id, chunk.text)
                return answer.draft_id
            except SendFailed as exc:
                if not exc.permanent:
                    raise
                log.info("draft %s of %s cannot be edited (%s); sending the chunk anew", answer.draft_id,
                         answer.id, exc)
        target = answer.target if index == 0 else replace(answer.target, reply_to=None)
        return await channel.send(target, chunk.text)


async def quietly(step: Awaitable[None]) -> None:
    """Progress and reactions are cosmetic: their failure never fails a delivery."""
    try:
        await step
    except Exception as exc:  # noqa: BLE001
        log.debug("status update failed: %s", exc)


def read_ref(ref: FileRef) -> bytes:
    """The bytes of a file sent by reference, as they were when it was stored (blocking);
    ``SendFailed`` (permanent) when it is gone, changed, or now a link."""
    try:
        data = read_inside(Path(ref.workspace), ref.path, ref.size)
    except FileNotFoundError:
        raise SendFailed(f"{ref.path} was removed before it was sent", permanent=True) from None
    except ValueError:  # bigger now
        raise SendFailed(f"{ref.path} changed before it was sent", permanent=True) from None
    except OSError as exc:  # a link out, a folder: not the file that was meant
        raise SendFailed(f"{ref.path} changed before it was sent ({exc.strerror or exc})", permanent=True) from None
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise SendFailed(f"{ref.path} changed before it was sent", permanent=True)
    return data
