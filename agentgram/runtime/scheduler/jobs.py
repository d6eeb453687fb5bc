"""The durable side of cron jobs: the ``scheduled_jobs`` and ``job_runs`` rows.

The database is the source of truth; APScheduler's in-memory jobs are rebuilt
from :meth:`JobStore.list_jobs` on start. Every method is one short write or read
transaction and every time comes from the injected :class:`Clock`, so the
store is deterministic under test. A job's schedule text is kept as typed and
re-parsed against its ``anchor_at`` (when it was set), so ``in 20m`` and
``every 2h`` mean the same instants after a restart.

A fire time is one ``job_runs`` row, a run or a ``missed`` record, whichever
is inserted first (:meth:`JobStore.start_run`, :meth:`JobStore.record_missed`,
the slot key of :mod:`runtime.infra.storage.scheduler_rows`): of two schedulers
on one database, or a restart racing its own catch-up, only one runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from sqlmodel import col, delete, select
from sqlmodel.ext.asyncio.session import AsyncSession

from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.scheduler_rows import (
    JobApprovals,
    JobRun,
    JobRunStatus,
    ScheduledJob,
    ScheduleKind,
    insert_slot,
)
from agentgram.runtime.scheduler.clock import Clock, as_utc
from agentgram.runtime.scheduler.localtime import zone
from agentgram.runtime.scheduler.misfire import MisfireDecision, Nothing, decide_misfire
from agentgram.runtime.scheduler.schedule import (
    MIN_INTERVAL,
    OnceSchedule,
    Schedule,
    ScheduleError,
    next_run,
    parse_schedule,
)
from agentgram.runtime.scheduler.values import Job, JobSpec

INTERRUPTED = "interrupted by restart"


class JobNotFound(ToolError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"there is no scheduled job #{job_id}")
        self.job_id = job_id


class JobFinished(ToolError):
    """Resuming a job that has no fire time left: there is nothing to resume."""

    def __init__(self, job_id: int) -> None:
        super().__init__(
            f"scheduled job #{job_id} has no runs left (a one-shot that ran or whose time passed); "
            "schedule a new one instead"
        )
        self.job_id = job_id


def job_zone(job: ScheduledJob) -> tzinfo:
    return zone(job.timezone)


def schedule_of(job: ScheduledJob) -> Schedule:
    """The job's typed schedule, as it was meant when set (stored rows skip the minimum)."""
    return parse_schedule(job.schedule, job_zone(job), job.anchor_at, min_interval=0)


def job_next_run(job: ScheduledJob, after: datetime) -> datetime | None:
    """The job's next fire time strictly after ``after``; the one rule the store and scheduler share."""
    return next_run(schedule_of(job), job_zone(job), after, anchor=job.anchor_at)


def job_finished(job: ScheduledJob, now: datetime) -> bool:
    """Whether the job has no run left: a one-shot that has run (any run uses it up, as
    :meth:`JobStore.finish_run` has it) or whose time passed, or a schedule that never fires again.

    The one rule for "done": such a job is listed as finished, not paused, and
    cannot be resumed (:class:`JobFinished`).
    """
    if isinstance(schedule_of(job), OnceSchedule) and job.last_run_at is not None and not job.enabled:
        return True
    return job_next_run(job, now) is None


def job_misfire(job: ScheduledJob, now: datetime, grace: float | timedelta) -> MisfireDecision:
    """What to do on start about fire times of ``job`` that passed while the bot was down.

    Fire times up to the newest one already run or recorded missed (or up to
    when the schedule was set) do not count, so a decision is never repeated.
    """
    if not job.enabled:
        return Nothing()
    since = max(job.anchor_at, job.last_fire_at or job.anchor_at)
    return decide_misfire(
        schedule_of(job), job_zone(job), since=since, now=now, grace=grace, anchor=job.anchor_at
    )


def job_value(job: ScheduledJob, *, next_run: datetime | None, running: bool, now: datetime) -> Job:
    """The row as the chat and the tools see it; ``next_run`` and ``running`` are the cron side's."""
    assert job.id is not None
    return Job(
        id=job.id,
        title=job.title,
        schedule=job.schedule,
        parsed=schedule_of(job),
        zone=job_zone(job),
        timezone=job.timezone,
        prompt=job.prompt,
        chat_id=job.chat_id,
        thread_id=job.thread_id,
        enabled=job.enabled,
        approvals=JobApprovals(job.approvals),
        next_run=next_run,
        running=running,
        finished=job_finished(job, now),
    )


@dataclass(frozen=True, slots=True)
class JobChanges:
    """Fields to change on a job; ``None`` leaves a field as it is (``thread_id``: the forum
    topic its runs report to, 0 for none)."""

    title: str | None = None
    schedule: str | None = None
    timezone: str | None = None
    prompt: str | None = None
    chat_id: int | None = None
    thread_id: int | None = None
    approvals: JobApprovals | None = None


class JobStore:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        *,
        default_timezone: str = "UTC",
        min_interval: float = MIN_INTERVAL,
    ) -> None:
        self._db = db
        self._clock = clock
        self._default_timezone = default_timezone
        self._min_interval = min_interval

    # --- jobs ------------------------------------------------------------------

    async def add(self, spec: JobSpec) -> ScheduledJob:
        """Validate and store a job; :class:`ScheduleError` for a bad schedule or zone."""
        now = self._clock.now()
        job = ScheduledJob(
            title=spec.title.strip() or spec.prompt.strip()[:40],
            schedule=" ".join(spec.schedule.split()),
            kind=ScheduleKind.ONCE,  # a placeholder: _set_schedule sets the parsed kind
            timezone=spec.timezone or self._default_timezone,
            prompt=spec.prompt,
            chat_id=spec.chat_id,
            thread_id=spec.thread_id,
            approvals=JobApprovals(spec.approvals),
            anchor_at=now,
            created_at=now,
            updated_at=now,
        )
        self._set_schedule(job, now)
        async with self._db.write() as session:
            session.add(job)
            await session.flush()
        return job

    async def get(self, job_id: int) -> ScheduledJob | None:
        async with self._db.read() as session:
            return await session.get(ScheduledJob, job_id)

    async def list_jobs(
        self, *, chat_id: int | None = None, enabled: bool | None = None
    ) -> list[ScheduledJob]:
        query = select(ScheduledJob).order_by(col(ScheduledJob.id))
        if chat_id is not None:
            query = query.where(ScheduledJob.chat_id == chat_id)
        if enabled is not None:
            query = query.where(ScheduledJob.enabled == enabled)
        async with self._db.read() as session:
            return list((await session.exec(query)).all())

    async def due(self, now: datetime | None = None) -> list[ScheduledJob]:
        """Enabled jobs whose next run is at or before ``now``."""
        moment = as_utc(now) if now else self._clock.now()
        query = (
            select(ScheduledJob)
            .where(ScheduledJob.enabled == True)  # noqa: E712  (SQL expression)
            .where(col(ScheduledJob.next_run_at) <= moment)
            .order_by(col(ScheduledJob.next_run_at))
        )
        async with self._db.read() as session:
            return list((await session.exec(query)).all())

    async def update(self, job_id: int, changes: JobChanges) -> ScheduledJob:
        now = self._clock.now()
        async with self._db.write() as session:
            job = await self._require(session, job_id)
            if changes.title is not None:
                job.title = changes.title.strip() or job.title
            if changes.prompt is not None:
                job.prompt = changes.prompt
            if changes.chat_id is not None:
                job.chat_id = changes.chat_id
            if changes.thread_id is not None:
                job.thread_id = changes.thread_id
            if changes.approvals is not None:
                job.approvals = JobApprovals(changes.approvals)
            if changes.schedule is not None or changes.timezone is not None:
                if changes.schedule is not None:
                    job.schedule = " ".join(changes.schedule.split())
                if changes.timezone is not None:
                    job.timezone = changes.timezone
                job.anchor_at = now
                self._set_schedule(job, now)  # raises before anything is written
            job.updated_at = now
            session.add(job)
        return job

    async def set_enabled(self, job_id: int, enabled: bool) -> ScheduledJob:
        """Pause or resume; a resumed job's next run is the next fire time from now.

        A finished job (:func:`job_finished`) cannot be resumed: :class:`JobFinished`.
        """
        now = self._clock.now()
        async with self._db.write() as session:
            job = await self._require(session, job_id)
            if enabled and job_finished(job, now):
                raise JobFinished(job_id)
            job.enabled = enabled
            job.next_run_at = job_next_run(job, now) if enabled else None
            job.updated_at = now
            session.add(job)
        return job

    async def delete(self, job_id: int) -> None:
        async with self._db.write() as session:
            job = await self._require(session, job_id)
            await session.exec(delete(JobRun).where(col(JobRun.job_id) == job_id))
            await session.delete(job)

    # --- runs ------------------------------------------------------------------

    async def start_run(
        self, job_id: int, *, session_id: int | None = None, scheduled_for: datetime | None = None
    ) -> JobRun | None:
        """A ``running`` row; the job's last run is now and its next run moves on.

        ``scheduled_for`` is the fire time this run stands for; leave it out
        for a manual "run now", which uses up no fire time. A fire time is
        inserted once (:func:`insert_slot`): ``None`` when it has a row already
        (another instance ran it or recorded it missed, or this one did before a
        restart), and the caller must not run it.
        """
        now = self._clock.now()
        run = JobRun(
            job_id=job_id,
            session_id=session_id,
            scheduled_for=as_utc(scheduled_for) if scheduled_for else None,
            started_at=now,
            status=JobRunStatus.RUNNING,
        )
        async with self._db.write() as session:
            job = await self._require(session, job_id)
            if not await insert_slot(session, run):
                return None
            job.last_run_at = now
            if run.scheduled_for is not None:
                job.last_fire_at = max(run.scheduled_for, job.last_fire_at or run.scheduled_for)
            job.running_session_id = session_id
            job.next_run_at = job_next_run(job, now) if job.enabled else None
            session.add(job)
        return run

    async def attach_session(self, run_id: int, session_id: int) -> None:
        """The run's session, once created (the row is written first so a crash is seen)."""
        async with self._db.write() as session:
            run = await session.get(JobRun, run_id)
            if run is None:
                return
            run.session_id = session_id
            job = await session.get(ScheduledJob, run.job_id)
            if job is not None:
                job.running_session_id = session_id
                session.add(job)
            session.add(run)

    async def finish_run(
        self,
        run_id: int,
        status: JobRunStatus,
        *,
        final_response: str | None = None,
        error: str | None = None,
    ) -> JobRun:
        """End a run; a one-shot job is disabled once it has run."""
        if status in (JobRunStatus.RUNNING, JobRunStatus.MISSED):
            raise ValueError(f"a run cannot finish as {status}")
        now = self._clock.now()
        async with self._db.write() as session:
            run = await session.get(JobRun, run_id)
            if run is None:
                raise ValueError(f"no job run #{run_id}")
            self._end(run, status, now, final_response=final_response, error=error)
            job = await session.get(ScheduledJob, run.job_id)
            if job is not None:
                job.running_session_id = None
                if isinstance(schedule_of(job), OnceSchedule):
                    job.enabled, job.next_run_at = False, None
                session.add(job)
            session.add(run)
        return run

    async def record_missed(self, job_id: int, fire_time: datetime) -> JobRun | None:
        """A ``missed`` row for a fire time too old to run; the next run moves past now.

        Inserted once, as a run is: ``None`` when the fire time has a row already.
        """
        now = self._clock.now()
        fire = as_utc(fire_time)
        run = JobRun(
            job_id=job_id,
            scheduled_for=fire,
            started_at=now,
            ended_at=now,
            duration_ms=0,
            status=JobRunStatus.MISSED,
        )
        async with self._db.write() as session:
            job = await self._require(session, job_id)
            if not await insert_slot(session, run):
                return None
            job.last_fire_at = max(fire, job.last_fire_at or fire)
            job.next_run_at = job_next_run(job, now) if job.enabled else None
            if job.next_run_at is None:
                job.enabled = False
            session.add(job)
        return run

    async def runs(self, job_id: int, *, limit: int = 20) -> list[JobRun]:
        """Newest first."""
        query = select(JobRun).where(JobRun.job_id == job_id).order_by(col(JobRun.id).desc()).limit(limit)
        async with self._db.read() as session:
            return list((await session.exec(query)).all())

    async def interrupted_runs(self) -> list[ScheduledJob]:
        """After a crash: fail every run left ``running`` and return their jobs, once each.

        The caller runs each returned job once more. Call it on start, before
        the scheduler fires anything, so no live run is mistaken for a dead one.
        """
        now = self._clock.now()
        async with self._db.write() as session:
            query = select(JobRun).where(JobRun.status == JobRunStatus.RUNNING).order_by(col(JobRun.id))
            stale = list((await session.exec(query)).all())
            jobs: dict[int, ScheduledJob] = {}
            for run in stale:
                self._end(run, JobRunStatus.FAILED, now, error=INTERRUPTED)
                session.add(run)
                job = jobs.get(run.job_id) or await session.get(ScheduledJob, run.job_id)
                if job is not None:
                    job.running_session_id = None
                    session.add(job)
                    jobs[run.job_id] = job
        return list(jobs.values())

    # --- helpers ------------------------------------------------------------------

    def _set_schedule(self, job: ScheduledJob, now: datetime) -> None:
        """Parse the job's schedule (strictly, as typed now) and set its kind and next run."""
        try:
            tz = job_zone(job)
        except ValueError as exc:
            raise ScheduleError(str(exc), "zone", zone=job.timezone) from None
        schedule = parse_schedule(job.schedule, tz, now, min_interval=self._min_interval)
        job.kind = schedule.kind
        job.next_run_at = next_run(schedule, tz, now, anchor=job.anchor_at) if job.enabled else None

    @staticmethod
    async def _require(session: AsyncSession, job_id: int) -> ScheduledJob:
        job = await session.get(ScheduledJob, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    @staticmethod
    def _end(
        run: JobRun,
        status: JobRunStatus,
        now: datetime,
        *,
        final_response: str | None = None,
        error: str | None = None,
    ) -> None:
        run.status = status
        run.ended_at = now
        run.duration_ms = max(0, int((now - as_utc(run.started_at)).total_seconds() * 1000))
        run.final_response = final_response
        run.error = error
