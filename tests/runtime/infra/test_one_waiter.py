"""The event and queue for a single waiting task (issue 31: no deque per chat)."""

from __future__ import annotations

import asyncio
import collections
import gc

import pytest

from agentgram.runtime.infra.one_waiter import OneReaderQueue, OneWaiterEvent


async def test_an_event_wakes_its_waiter_and_a_set_event_does_not_wait() -> None:
    event = OneWaiterEvent()
    waiting = asyncio.create_task(event.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    event.set()
    await asyncio.wait_for(waiting, 1)
    assert event.is_set()
    await asyncio.wait_for(event.wait(), 1)  # set: returns at once
    event.clear()
    assert not event.is_set()


async def test_a_second_waiter_is_refused_and_a_cancelled_one_leaves_room() -> None:
    event = OneWaiterEvent()
    first = asyncio.create_task(event.wait())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="has a waiter already"):
        await event.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    again = asyncio.create_task(event.wait())  # the cancelled wait left nothing in the way
    await asyncio.sleep(0)
    event.set()
    await asyncio.wait_for(again, 1)


async def test_a_wait_ended_by_a_timeout_is_woken_next_time() -> None:
    """The session worker's idle wait: ``asyncio.timeout`` around :meth:`wait`, then wait again."""
    event = OneWaiterEvent()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await event.wait()
    asyncio.get_running_loop().call_later(0.01, event.set)
    await asyncio.wait_for(event.wait(), 1)


async def test_a_queue_gives_its_items_in_order_across_bursts() -> None:
    queue: OneReaderQueue[int] = OneReaderQueue()
    read: list[int] = []

    async def reader() -> None:
        while True:
            read.append(await queue.get())
            queue.task_done()

    task = asyncio.create_task(reader())
    for burst in (range(0, 50), range(50, 51), range(51, 120)):
        for n in burst:
            queue.put_nowait(n)
        assert queue.qsize() == len(burst)
        await asyncio.wait_for(queue.join(), 1)
        assert queue.empty()
    assert read == list(range(120))
    task.cancel()


async def test_join_waits_for_every_item_handled_and_may_be_awaited_by_several() -> None:
    queue: OneReaderQueue[str] = OneReaderQueue()
    await asyncio.wait_for(queue.join(), 1)  # nothing put: at once
    queue.put_nowait("a")
    queue.put_nowait("b")
    joiners = [asyncio.create_task(queue.join()) for _ in range(2)]
    assert await queue.get() == "a"
    queue.task_done()
    await asyncio.sleep(0)
    assert not any(j.done() for j in joiners), "one item is still not handled"
    assert await queue.get() == "b"
    queue.task_done()
    await asyncio.wait_for(asyncio.gather(*joiners), 1)
    with pytest.raises(ValueError, match="too many times"):
        queue.task_done()


async def test_an_idle_event_and_queue_hold_no_deque() -> None:
    """What they are for: asyncio's own kinds make one deque (760 bytes) per event, four per queue."""
    gc.collect()
    before = sum(1 for o in gc.get_objects() if type(o) is collections.deque)
    kept = [(OneWaiterEvent(), OneReaderQueue[int]()) for _ in range(100)]
    gc.collect()
    assert sum(1 for o in gc.get_objects() if type(o) is collections.deque) == before
    assert len(kept) == 100
