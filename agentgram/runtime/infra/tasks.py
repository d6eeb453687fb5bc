"""Background tasks, each owned by one :class:`TaskSet` (issue 11: every task has one owner).

``asyncio.TaskGroup`` fits work that ends inside one ``async with``; an
owner's tasks here live from its start to its close and must not take each
other down (one chat's failed outbox is not another's), so the owner keeps
them in a set instead: finished tasks leave it at once (nothing only grows),
and :meth:`TaskSet.close` cancels and awaits the rest. The owners: the
chat adapter's delivery (outboxes, typing), the scheduler's engine (runs), the
turn services (prefetched requests), the session hub (workers and turns,
kept with their worker), the runtime (the LLM check), the bot (ingest).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentgram.runtime.infra.log import get_logger

log = get_logger("tasks")

T = TypeVar("T")


class TaskSet:
    """The running tasks of one owner; closed once, when the owner stops."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def spawn(
        self, coro: Coroutine[Any, Any, T], *, name: str | None = None, report: bool = True
    ) -> asyncio.Task[T]:
        """Run ``coro`` as a task of this owner's; refused once the owner closed.

        A failure is logged unless ``report`` is off: a task whose result someone awaits
        reports its own failure there."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.owner} is closed: no new task {name or ''}")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done if report else self._tasks.discard)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: task %s failed", self.owner, task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel every task still running and wait until each has ended; idempotent."""
        self._closed = True
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def cancel_and_wait(*tasks: asyncio.Task[Any]) -> None:
    """End tasks one owns but no longer needs: cancelled, then awaited (their errors dropped)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["TaskSet", "cancel_and_wait"]
