"""Group commit: many concurrent callers, one write transaction per batch.

The mailbox's accepts (:mod:`runtime.core.mailbox.mailbox`) and the chats' "this answer is
shown" marks (:meth:`~runtime.infra.storage.history.HistoryStore.mark_delivered`) go through it.

Each :meth:`Batcher.submit` queues an item and awaits its own future. One
flusher task, started when the first item arrives and ending when the queue is
empty, takes everything queued so far (up to ``max_batch``) and hands it to
``flush``, which returns one outcome per item: a result, or an exception for
that caller alone. If ``flush`` itself raises, every caller of the batch gets
that exception. While a batch is being written the next one queues up, so under
load the batches grow by themselves and a lone caller never waits for company.

A caller cancelled before its batch is taken is dropped; one cancelled later
only stops waiting, and its item is written with the rest of the batch (an
idempotent retry then finds it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextvars import Context
from typing import Generic, TypeVar

from agentgram.runtime.infra.errors import StorageError

T = TypeVar("T")
R = TypeVar("R")

Flush = Callable[[list[T]], Awaitable[Sequence[R | Exception]]]


class Batcher(Generic[T, R]):
    """Batches concurrent :meth:`submit` calls into calls of ``flush``, one at a time."""

    def __init__(self, flush: Flush[T, R], max_batch: int = 256) -> None:
        self._flush = flush
        self._max_batch = max_batch
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._flusher is None:
            # a context of its own: the batch holds other callers' mail too, so it must not run
            # under the first caller's context (a cluster's session lease: runtime.infra.ownership)
            self._flusher = asyncio.create_task(self._run(), name="group-commit", context=Context())
        return await future

    async def drain(self) -> None:
        """Wait for the writes under way (the owner's close: they land before the database closes)."""
        while (flusher := self._flusher) is not None:
            await asyncio.wait({flusher})

    async def _run(self) -> None:
        try:
            while self._queue:
                taken, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
                batch = [(item, future) for item, future in taken if not future.done()]
                if batch:
                    await self._write(batch)
        finally:
            self._flusher = None
            # only left over if this task was cancelled: fail them rather than hang them
            _settle_all(
                [future for _, future in self._queue], StorageError("the group-commit writer stopped")
            )
            self._queue = []

    async def _write(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        futures = [future for _, future in batch]
        try:
            outcomes = await self._flush([item for item, _ in batch])
            if len(outcomes) != len(batch):
                raise StorageError(f"flush returned {len(outcomes)} outcomes for {len(batch)} items")
        except Exception as exc:
            outcomes = [exc] * len(batch)
        except BaseException:  # this task was cancelled (loop shutdown): the callers were not
            _settle_all(futures, StorageError("the write was interrupted; it may or may not have landed"))
            raise
        for future, outcome in zip(futures, outcomes, strict=True):
            if future.done():  # its caller was cancelled and stopped waiting
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


def _settle_all(futures: list[asyncio.Future[R]], error: Exception) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)
