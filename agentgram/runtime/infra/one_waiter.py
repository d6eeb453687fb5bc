"""An event and a queue for a single waiting task, without a deque per waiter (issue 31).

``asyncio.Event`` and ``asyncio.Queue`` keep their waiters in ``collections.deque``\\ s made with
them, one an event and three a queue (its items, getters, putters) plus its ``join`` event's. An
empty deque is a block of 64 slots: 760 bytes from the C heap. Every chat has an event and a queue
with exactly one waiter each, its own task: the session worker's wake-up
(:mod:`runtime.core.sessions.hub`) and the queue of events of the chat adapter's outbox for the
chat. With asyncio's kinds that is five deques a chat, ≈ 3.7 MiB at 1,000 chats. These keep their
one waiter in a slot: ≈ 100 bytes a chat when nothing waits.

Both refuse a second waiter at once (``RuntimeError``) rather than strand it, and a wait that was
cancelled (a timeout) leaves room for the next. Waking is ``Future.set_result``, as asyncio's own
kinds do, so a waiter resumes at the loop's next pass, in the order it was woken.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")


class _OneWaiter:
    """The waiting task's future, while it waits (a wait that was cancelled leaves its future
    done, replaced by the next)."""

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _park(self) -> asyncio.Future[None]:
        """What the one waiter awaits until the next :meth:`_wake`: a future, not a coroutine
        of its own (one frame less per waiting chat)."""
        if self._waiter is not None and not self._waiter.done():
            raise RuntimeError(f"{type(self).__name__} has a waiter already")
        self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter


class OneWaiterEvent(_OneWaiter):
    """``asyncio.Event`` for one waiting task: :meth:`set`, :meth:`clear`, :meth:`is_set`, :meth:`wait`."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        super().__init__()
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if not self._set:
            self._set = True
            self._wake()

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> None:
        """Until the event is set (at once if it is)."""
        if not self._set:
            await self._park()


class OneReaderQueue(_OneWaiter, Generic[T]):
    """``asyncio.Queue`` without a bound, for one reading task.

    Items are kept in a list read from a moving head (a streamed reply puts dozens at once;
    popping the list's front would move the rest each time). The items read are cut off once
    they are half the list, and the list is emptied once all are read, so an idle queue holds no
    storage and a queue that is never quite drained holds no more than twice what waits.
    :meth:`join` may be awaited by any number of tasks (closing and tests do): its event is made
    only when one does.
    """

    __slots__ = ("_head", "_items", "_joined", "_unfinished")

    def __init__(self) -> None:
        super().__init__()
        self._items: list[T] = []
        self._head = 0
        self._unfinished = 0
        self._joined: asyncio.Event | None = None

    def qsize(self) -> int:
        return len(self._items) - self._head

    def empty(self) -> bool:
        return self.qsize() == 0

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        self._unfinished += 1
        self._wake()

    async def get(self) -> T:
        """The oldest item, once there is one."""
        while self.empty():
            await self._park()
        item = self._items[self._head]
        self._head += 1
        if self._head == len(self._items):  # all read: the list lets its storage go
            self._items.clear()
            self._head = 0
        elif self._head * 2 >= len(self._items):  # half read: those go, in one move
            del self._items[: self._head]
            self._head = 0
        return item

    def task_done(self) -> None:
        """One item taken by :meth:`get` is handled (as ``asyncio.Queue.task_done``)."""
        if self._unfinished <= 0:
            raise ValueError("task_done() called too many times")
        self._unfinished -= 1
        if self._unfinished == 0 and self._joined is not None:
            self._joined.set()
            self._joined = None

    async def join(self) -> None:
        """Until every item put is handled (:meth:`task_done`)."""
        if self._unfinished:
            if self._joined is None:
                self._joined = asyncio.Event()
            await self._joined.wait()


__all__ = ["OneReaderQueue", "OneWaiterEvent"]
