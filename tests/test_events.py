import asyncio

from bot.agent.events import EventBus, EventKind, RunEvent
from bot.conversation import Conversation


def event(i: int) -> RunEvent:
    return RunEvent(EventKind.DELTA, "r1", Conversation.of_key("agent:main:test:dm:1"), str(i))


async def test_a_slow_subscriber_never_holds_up_the_emitter_or_the_others() -> None:
    bus = EventBus()
    fast: list[str] = []
    slow: list[str] = []

    async def sluggish(e: RunEvent) -> None:
        await asyncio.sleep(0.2)
        slow.append(e.text)

    bus.subscribe(sluggish)
    bus.subscribe(lambda e: fast.append(e.text))
    for i in range(5):
        await bus.emit(event(i))
    assert slow == []  # emit did not wait for the sluggish subscriber (0.2 s an event)
    assert fast == ["0", "1", "2", "3", "4"]
    await asyncio.sleep(1.2)
    assert slow == ["0", "1", "2", "3", "4"]  # in order, all of them
    await bus.aclose()


async def test_a_failing_subscriber_is_logged_and_skipped(caplog) -> None:  # type: ignore[no-untyped-def]
    bus = EventBus()
    got: list[str] = []

    def bad(e: RunEvent) -> None:
        raise RuntimeError("boom")

    async def bad_async(e: RunEvent) -> None:
        raise RuntimeError("async boom")

    bus.subscribe(bad)
    bus.subscribe(bad_async)
    bus.subscribe(lambda e: got.append(e.text))
    await bus.emit(event(1))
    await bus.emit(event(2))
    await asyncio.sleep(0.05)
    assert got == ["1", "2"]
    assert "boom" in caplog.text and "async boom" in caplog.text
    await bus.aclose()


async def test_unsubscribe() -> None:
    bus = EventBus()
    got: list[str] = []

    async def sub(e: RunEvent) -> None:
        got.append(e.text)

    stop = bus.subscribe(sub)
    await bus.emit(event(1))
    await asyncio.sleep(0.01)
    stop()
    await bus.emit(event(2))
    await asyncio.sleep(0.01)
    assert got == ["1"]
