"""The port's lifecycle helper and capability checks, without a platform."""

from __future__ import annotations

import asyncio

import pytest

from adapters.console.channel import ConsoleChannel
from bot.channels import Asks, Interrupts, Lifecycle, Notes, Streams
from bot.errors import ChannelError
from tests.fakes.channel import RecordingChannel


async def test_the_first_ending_wins_and_wait_reports_it() -> None:
    life = Lifecycle()
    life.open()
    waiting = asyncio.create_task(life.wait())
    await asyncio.sleep(0)
    assert not life.ended and life.failure is None
    life.fail(ChannelError("channels.x.token: refused"))
    life.close()  # too late: it failed
    with pytest.raises(ChannelError, match="refused"):
        await waiting
    assert life.ended and isinstance(life.failure, ChannelError)
    with pytest.raises(ChannelError):
        await life.wait()


async def test_a_clean_end_and_a_fresh_start() -> None:
    life = Lifecycle()
    life.close()  # before start: nothing to end
    life.open()
    life.close()
    await life.wait()
    assert life.ended and life.failure is None
    life.open()  # started again
    assert not life.ended


async def test_owned_tasks_end_with_stop_tasks_after_their_grace() -> None:
    life = Lifecycle()
    quick_done = asyncio.Event()

    async def quick() -> None:
        await asyncio.sleep(0.01)
        quick_done.set()

    slow = life.spawn(asyncio.sleep(60), "slow")
    life.spawn(quick(), "quick")
    adopted = asyncio.ensure_future(asyncio.sleep(60))
    life.own(adopted)
    assert len(life.tasks) == 3
    await life.stop_tasks(grace=0.1)
    assert quick_done.is_set() and slow.cancelled() and adopted.cancelled()
    assert life.tasks == frozenset()


def test_capabilities_are_found_by_type() -> None:
    console = ConsoleChannel(user="alice", input_fd=0)
    assert isinstance(console, Streams) and isinstance(console, Notes) and isinstance(console, Interrupts)
    assert isinstance(console, Asks)
    recording = RecordingChannel()
    assert not isinstance(recording, Streams) and not isinstance(recording, Notes)
    assert not isinstance(recording, Asks)
