"""The jobs part of the door (``rt.jobs``): the chat's cron jobs and the tic, as ``/cron``,
``/tic``, the terminal's ``/jobs`` and the web view use them.

The adapters reach the scheduler only through this part: it forwards to
:class:`~runtime.scheduler.service.SchedulerService`, which checks that a job belongs to the
asking chat (``chat_id``) and hands out values, never rows. :meth:`Jobs.now` is the scheduler's
clock, read when asked (a test's clock is the one a schedule is parsed against).
"""

from __future__ import annotations

from datetime import datetime

from agentgram.runtime.scheduler.plan import TicPlan
from agentgram.runtime.scheduler.service import SchedulerService
from agentgram.runtime.scheduler.tic import TicDecision
from agentgram.runtime.scheduler.tic_runner import TicStatus
from agentgram.runtime.scheduler.values import Job, JobSpec


class Jobs:
    def __init__(self, *, scheduler: SchedulerService) -> None:
        self.scheduler = scheduler

    def now(self) -> datetime:
        """The scheduler's current instant (aware UTC): what a new schedule starts from."""
        return self.scheduler.clock.now()

    async def kill_job(self, job_id: int, *, chat_id: int | None = None) -> bool:
        """A running cron job's session cancelled at once, as ``/cron kill`` does; ``False`` if
        it is not running. Given ``chat_id``, the job must be that chat's (else ``JobNotFound``)."""
        return await self.scheduler.kill(job_id, chat_id=chat_id)

    async def add_job(self, spec: JobSpec) -> Job:
        """Store and schedule; ``ScheduleError`` for a bad schedule or zone."""
        return await self.scheduler.add_job(spec)

    async def job(self, job_id: int, *, chat_id: int | None = None) -> Job:
        """The job, if it exists and (given ``chat_id``) belongs to that chat; else ``JobNotFound``."""
        return await self.scheduler.job(job_id, chat_id=chat_id)

    async def list_jobs(self, chat_id: int | None = None) -> list[Job]:
        return await self.scheduler.list_jobs(chat_id)

    async def set_enabled(self, job_id: int, enabled: bool, *, chat_id: int | None = None) -> Job:
        return await self.scheduler.set_enabled(job_id, enabled, chat_id=chat_id)

    async def delete_job(self, job_id: int, *, chat_id: int | None = None) -> None:
        await self.scheduler.delete_job(job_id, chat_id=chat_id)

    async def run_now(self, job_id: int, *, chat_id: int | None = None) -> bool:
        """Start a manual run; ``False`` if one is already running."""
        return await self.scheduler.run_now(job_id, chat_id=chat_id)

    async def tic(self, *, manual: bool = False) -> TicDecision:
        return await self.scheduler.tic(manual=manual)

    async def set_tic_enabled(self, enabled: bool) -> TicPlan:
        return await self.scheduler.set_tic_enabled(enabled)

    async def set_tic_interval(self, text: str) -> TicPlan:
        return await self.scheduler.set_tic_interval(text)

    async def tic_status(self) -> TicStatus:
        return await self.scheduler.tic_status()
