"""The dispatcher alone, with a scriptable execute: lanes, queue modes, caps, /stop."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from bot.conversation import conversation_for
from bot.messages import ChatType, InboundMessage, Sender
from bot.runs import ActiveRun, Admission, Dispatcher, Pending, QueueMode, RunCaps

_ids = itertools.count(1)


def pending(text: str, chat: str = "c1", chat_type: ChatType = ChatType.DM) -> Pending:
    msg = InboundMessage("test", "bot", chat, chat_type, Sender("u1", "Ann"), text, f"m{next(_ids)}")
    return Pending(msg, next(_ids), conversation_for(msg, "main"))


class Recorder:
    """An execute that records batches and takes ``hold`` seconds (or until released)."""

    def __init__(self, hold: float = 0.05) -> None:
        self.hold = hold
        self.batches: list[tuple[str, list[str]]] = []
        self.running = 0
        self.peak = 0
        self.cancelled: list[list[str]] = []
        self.started = asyncio.Event()

    async def __call__(self, run: ActiveRun) -> None:
        texts = [p.msg.text for p in run.batch]
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.started.set()
        try:
            await asyncio.sleep(self.hold)
            self.batches.append((run.session_key, texts))
        except asyncio.CancelledError:
            self.cancelled.append(texts)
            raise
        finally:
            self.running -= 1


async def settle(d: Dispatcher, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while d._lanes:
            await asyncio.sleep(0.01)


@pytest.mark.parametrize(("mode", "expected"), [
    (QueueMode.FOLLOWUP, [["a"], ["b"], ["c"]]),
    (QueueMode.COLLECT, [["a"], ["b", "c"]]),
])
async def test_busy_session_queues_in_arrival_order(mode: QueueMode, expected: list[list[str]]) -> None:
    rec = Recorder()
    d = Dispatcher(rec, RunCaps(queue_mode=mode, debounce=0.01))
    assert d.submit("k", pending("a")) is Admission.STARTED
    assert d.submit("k", pending("b")) is Admission.QUEUED
    assert d.submit("k", pending("c")) is Admission.QUEUED
    await settle(d)
    assert [texts for _, texts in rec.batches] == expected


async def test_interrupt_cancels_the_active_run_and_runs_the_newest() -> None:
    rec = Recorder(hold=0.3)
    d = Dispatcher(rec, RunCaps(queue_mode=QueueMode.INTERRUPT, debounce=0.01))
    d.submit("k", pending("old"))
    await rec.started.wait()
    d.submit("k", pending("new"))
    await settle(d)
    assert rec.cancelled == [["old"]] and [t for _, t in rec.batches] == [["new"]]


async def test_sessions_run_concurrently() -> None:
    rec = Recorder(hold=0.2)
    d = Dispatcher(rec, RunCaps())
    for i in range(5):
        d.submit(f"k{i}", pending("x", chat=f"c{i}"))
    await settle(d)
    assert rec.peak == 5


async def test_global_and_group_caps_queue_runs_without_dropping_them() -> None:
    rec = Recorder(hold=0.1)
    queued: list[str] = []

    async def on_queued(run: ActiveRun) -> None:
        queued.append(run.session_key)

    d = Dispatcher(rec, RunCaps(max_concurrent=4, max_per_group=2), on_queued=on_queued)
    for i in range(3):  # three threads of one group: at most 2 at once
        d.submit(f"g:thread:{i}", pending("x", chat="g", chat_type=ChatType.GROUP))
    await asyncio.sleep(0.05)
    assert rec.running == 2 and len(queued) == 1
    await settle(d)
    assert len(rec.batches) == 3

    rec2 = Recorder(hold=0.1)
    d2 = Dispatcher(rec2, RunCaps(max_concurrent=3))
    for i in range(7):
        d2.submit(f"k{i}", pending("x", chat=f"c{i}"))
    await settle(d2)
    assert rec2.peak == 3 and len(rec2.batches) == 7


async def test_queue_cap_rejects_the_21st() -> None:
    rec = Recorder(hold=0.2)
    d = Dispatcher(rec, RunCaps(max_queued=20, queue_mode=QueueMode.FOLLOWUP, debounce=0))
    d.submit("k", pending("first"))
    admissions = [d.submit("k", pending(str(i))) for i in range(21)]
    assert admissions[:20] == [Admission.QUEUED] * 20 and admissions[20] is Admission.REJECTED
    await d.aclose()


async def test_stop_cancels_the_run_and_discards_the_queue() -> None:
    rec = Recorder(hold=5)
    discarded: list[list[str]] = []

    async def on_discard(batch: tuple[Pending, ...]) -> None:
        discarded.append([p.msg.text for p in batch])

    d = Dispatcher(rec, RunCaps(debounce=0), on_discard=on_discard)
    d.submit("k", pending("a"))
    d.submit("k", pending("b"))
    await rec.started.wait()
    assert await d.stop("k") == (True, 1)
    assert rec.cancelled == [["a"]] and discarded == [["b"]]
    await settle(d)
    assert rec.batches == []
    assert await d.stop("k") == (False, 0)  # nothing running now


async def test_stop_a_run_waiting_for_a_slot() -> None:
    rec = Recorder(hold=5)
    d = Dispatcher(rec, RunCaps(max_concurrent=1))
    d.submit("busy", pending("x", chat="c1"))
    await rec.started.wait()
    d.submit("waiting", pending("y", chat="c2"))
    await asyncio.sleep(0.05)
    assert d.active("waiting") is not None  # it holds a run that waits for the slot
    assert await d.stop("waiting") == (True, 0)
    await d.stop("busy")
    await settle(d)
    assert rec.batches == [] and rec.cancelled == [["x"]]


async def test_stop_marks_the_run_stopped() -> None:
    rec = Recorder(hold=5)
    d = Dispatcher(rec, RunCaps())
    d.submit("k", pending("a"))
    await rec.started.wait()
    run = d.active("k")
    assert run is not None and not run.stopped
    d.submit("k", pending("b"))
    await d.stop("k")
    assert run.stopped


async def test_debounce_waits_for_quiet_before_a_follow_up() -> None:
    rec = Recorder(hold=0.05)
    d = Dispatcher(rec, RunCaps(queue_mode=QueueMode.COLLECT, debounce=0.3))
    loop = asyncio.get_running_loop()
    started = loop.time()
    d.submit("k", pending("a"))
    await asyncio.sleep(0.01)
    d.submit("k", pending("b"))
    await asyncio.sleep(0.2)
    d.submit("k", pending("c"))  # arrives during the debounce window: joins the batch
    await settle(d)
    assert [t for _, t in rec.batches] == [["a"], ["b", "c"]]
    assert loop.time() - started >= 0.5  # 0.21 + 0.3 of quiet


async def test_the_first_message_is_never_delayed() -> None:
    rec = Recorder(hold=0)
    d = Dispatcher(rec, RunCaps(debounce=5))
    d.submit("k", pending("a"))
    await asyncio.wait_for(rec.started.wait(), 0.5)
    await settle(d)


async def test_shutdown_propagates_and_keeps_nothing_running() -> None:
    rec = Recorder(hold=5)
    d = Dispatcher(rec, RunCaps())
    d.submit("k", pending("a"))
    await rec.started.wait()
    await d.aclose()
    assert rec.cancelled == [["a"]] and rec.running == 0


async def test_one_lane_decides_in_order_beside_the_active_run_and_ends_when_idle() -> None:
    """The intake's stage and the run stage are one lane: a message is decided (and answered,
    as /status is) while the session's run goes on, decided ones join the run queue, and the
    lane is gone once both stages are empty."""
    rec = Recorder(hold=0.3)
    d = Dispatcher(rec, RunCaps(queue_mode=QueueMode.FOLLOWUP, debounce=0.0, max_waiting=2))
    decided: list[str] = []
    gate = asyncio.Event()

    def step(text: str, run: bool = True, wait: bool = False):  # type: ignore[no-untyped-def]
        async def decide() -> None:
            if wait:
                await gate.wait()
            decided.append(text)
            if run:
                d.submit("k", pending(text))
        return decide

    assert d.decide("k", step("a"))
    await rec.started.wait()  # "a" runs
    assert d.decide("k", step("status", run=False))
    await asyncio.sleep(0.05)
    assert decided == ["a", "status"] and rec.running == 1  # answered while "a" still runs
    assert d.decide("k", step("b", wait=True)) and d.decide("k", step("c"))
    assert not d.decide("k", step("d"))  # max_waiting: the intake answers it busy
    assert d.queued("k") == 2  # both stages count
    gate.set()
    await settle(d)
    assert decided == ["a", "status", "b", "c"]
    assert [texts for _, texts in rec.batches] == [["a"], ["b"], ["c"]]
    assert not d._lanes


async def test_a_failing_decision_does_not_stop_the_lane() -> None:
    d = Dispatcher(Recorder(hold=0.0), RunCaps(debounce=0.0))
    decided: list[str] = []

    async def broken() -> None:
        raise RuntimeError("disk full")

    async def fine() -> None:
        decided.append("fine")

    d.decide("k", broken)
    d.decide("k", fine)
    await settle(d)
    assert decided == ["fine"]
