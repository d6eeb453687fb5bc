"""APScheduler and the tasks its job functions start: one lifetime for both.

The ``AsyncIOScheduler`` is built on each start (its in-memory jobs are
rebuilt from the database, the source of truth) and dropped on stop. Every
APScheduler job has ``max_instances=1`` and ``coalesce=True``; what to do
about fire times missed while the bot was down is decided by the cron side
(:func:`~runtime.scheduler.jobs.job_misfire`), not by APScheduler's own grace.
The work a job function starts runs as a tracked task, so :meth:`Engine.stop`
can cancel and await all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agentgram.runtime.infra.tasks import TaskSet


class Engine:
    def __init__(self) -> None:
        self.aps: AsyncIOScheduler | None = None
        """``None`` while stopped: nothing may be (re)scheduled then."""
        self._tasks = TaskSet("scheduler")

    def start(self, timezone: ZoneInfo, misfire_grace: float) -> None:
        self.aps = AsyncIOScheduler(
            timezone=timezone,
            job_defaults={
                "max_instances": 1,
                "coalesce": True,
                "misfire_grace_time": max(1, int(misfire_grace)),
            },
        )
        self.aps.start()

    async def stop(self) -> None:
        """Stop firing and cancel the work in flight; idempotent."""
        if self.aps is not None and self.aps.running:
            self.aps.shutdown(wait=False)
        self.aps = None
        tasks, self._tasks = self._tasks, TaskSet("scheduler")  # a later start runs new work
        await tasks.close()
        await asyncio.sleep(0)  # let APScheduler's deferred shutdown run on this loop

    def remove_job(self, job_id: str) -> None:
        """Drop an APScheduler entry if there is one."""
        if self.aps is not None and self.aps.get_job(job_id) is not None:
            self.aps.remove_job(job_id)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run scheduled work as a task :meth:`stop` cancels and awaits (a failure is logged)."""
        return self._tasks.spawn(coro, name="scheduled work")

    @staticmethod
    async def await_quietly(task: asyncio.Task[Any]) -> None:
        """APScheduler's job functions wait here for the tracked task doing the work.

        On shutdown APScheduler cancels the job function; the work itself is
        cancelled by :meth:`stop`, so the job function just ends instead of
        being logged as a failed job.
        """
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})
