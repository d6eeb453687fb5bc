"""Cron jobs on APScheduler: each job's entry, its fire times, and one run of it.

What to do about fire times missed while the bot was down is decided once per
job by :func:`~runtime.scheduler.jobs.job_misfire` (``scheduler.misfire_grace``):
a recent one runs once, an older one is recorded as missed. A run a crash
interrupted is recorded failed ("interrupted by restart") and re-run once.
A job has at most one run in flight; a fire time that finds one running is
missed rather than queued.

Each fire time is run or recorded missed once, whoever fires it: its row is
inserted first, once (:meth:`JobStore.start_run`, :meth:`JobStore.record_missed`),
and only the instance whose row went in goes on. A fire time with a row already
(another scheduler on the database, or this one before a restart) is left alone
and logged at debug. The catch-up on start goes the same way, so a new leader
never runs what the previous one ran or recorded missed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentgram.runtime.core.mailbox import (
    ControlAction,
    ControlBody,
    Envelope,
    Priority,
    ScheduledTurnBody,
    Sender,
    SenderKind,
)
from agentgram.runtime.core.turn.outcome import Cancelled, TurnOutcome
from agentgram.runtime.infra.events import CronResult, LocaleText, ModelText, ReportBody
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource
from agentgram.runtime.infra.storage.scheduler_rows import JobApprovals, JobRun, JobRunStatus, ScheduledJob
from agentgram.runtime.scheduler.delivery import Delivery
from agentgram.runtime.scheduler.headless import HeadlessTurns, failure
from agentgram.runtime.scheduler.jobs import (
    JobStore,
    job_misfire,
    job_next_run,
    job_value,
    job_zone,
    schedule_of,
)
from agentgram.runtime.scheduler.misfire import RecordMissed, RunNow
from agentgram.runtime.scheduler.part import Part, Shared
from agentgram.runtime.scheduler.plan import Notice, RunResult, run_result
from agentgram.runtime.scheduler.schedule import OnceSchedule, describe, to_trigger
from agentgram.runtime.scheduler.values import Job

log = get_logger("scheduler")


def cron_job_id(job_id: int) -> str:
    return f"cron-{job_id}"


def cron_input(job: ScheduledJob, now: datetime, *, manual: bool = False) -> str:
    """What a cron run is told: its prompt framed as a scheduled run, as a tic's is.

    Without the frame a job's prompt reads like a fresh user message, and a
    reminder ("remind me to call Anna") got the model to schedule it again at
    every run. The frame says which task this is and when it runs, that it
    needs no scheduling, that nobody answers questions, and what approvals do.
    """
    zone = job_zone(job)
    local = now.astimezone(zone)
    name = getattr(zone, "key", None) or local.tzname()
    schedule = schedule_of(job)
    how = "started by hand from /cron" if manual else "a scheduled run"
    again = (
        "this is its only run"
        if isinstance(schedule, OnceSchedule)
        else "it runs again by itself at its next time"
    )
    approvals = (
        "actions that need approval are asked of the user in this chat, who may not answer soon"
        if job.approvals == JobApprovals.ASK
        else "actions that need approval will be denied"
    )
    return (
        f"[CRON] {local.isoformat(timespec='seconds')} {name}\n"
        f"Scheduled task “{job.title}” (cron #{job.id}, {describe(schedule, zone)}): {how} of a task "
        "the user set up earlier, not a new message from the user. Carry out the instruction below "
        "now; your reply is sent to the user as the task's result. The task is already scheduled and "
        f"{again}: do not schedule, reschedule or change scheduled jobs unless the instruction "
        f"explicitly says so. Nobody is waiting to answer questions; {approvals}.\n\n"
        f"Instruction:\n{job.prompt}"
    )


def result_body(result: RunResult) -> ReportBody:
    """What the chat is told of a finished run: the model's reply, or the locale's words for
    no output or for what went wrong (the exception text is only logged)."""
    if result.status == JobRunStatus.SUCCESS:
        text = (result.response or "").strip()
        return ModelText(text=text) if text else LocaleText(key="cron-no-output")
    notice = result.notice or Notice("cron-run-failed")
    return LocaleText(key=notice.key, params=dict(notice.params))


@dataclass(slots=True)
class ActiveRun:
    """A cron run in flight; ``session_id`` is set once its mail is accepted."""

    job_id: int
    run_id: int | None = None
    session_id: int | None = None
    killed: bool = False
    manual: bool = False  # "Run now", not a fire time


def _shape(job: ScheduledJob) -> tuple[object, ...]:
    """What decides a job's APScheduler entry."""
    return (job.schedule, job.kind, job.timezone, job.enabled, job.anchor_at)


class CronRunner(Part):
    def __init__(self, shared: Shared, turns: HeadlessTurns, delivery: Delivery, jobs: JobStore) -> None:
        super().__init__(shared)
        self.turns = turns
        self.delivery = delivery
        self.jobs = jobs
        self.listeners: list[Callable[[JobRun], None]] = []
        """Told after every finished (or missed) cron run."""
        self._running: dict[int, ActiveRun] = {}
        self._known: dict[int, tuple[object, ...]] = {}
        """Each job's schedule as last scheduled here (:meth:`sync` compares)."""

    # --- start: what the downtime left ---------------------------------------------------

    async def interrupted(self) -> set[int]:
        """Enabled jobs whose run a crash cut short; those runs are recorded failed."""
        return {job.id for job in await self.jobs.interrupted_runs() if job.enabled and job.id is not None}

    async def resume(self, interrupted: set[int]) -> None:
        """Catch up on missed fire times, then give every enabled job its APScheduler entry."""
        for job in await self.jobs.list_jobs(enabled=True):  # a job paused since is not re-run
            await self._catch_up(job, rerun=job.id in interrupted)
        for job in await self.jobs.list_jobs(enabled=True):
            self.schedule(job)

    async def _catch_up(self, job: ScheduledJob, *, rerun: bool) -> None:
        """On start: run a recent missed fire time once, record an old one as missed."""
        assert job.id is not None
        decision = job_misfire(job, self.clock.now(), self.ports.scheduler.misfire_grace)
        fire: datetime | None = None
        if isinstance(decision, RunNow):
            fire = decision.fire_time
        elif isinstance(decision, RecordMissed):
            await self._record_missed(job.id, decision.fire_time)
        if fire is not None or rerun:
            self.launch(job.id, scheduled_for=fire)

    # --- APScheduler side ----------------------------------------------------------------

    def schedule(self, job: ScheduledJob) -> None:
        """(Re)place the job's APScheduler entry; a paused or finished job has none."""
        assert job.id is not None
        self._known[job.id] = _shape(job)
        self.unschedule(job.id)
        aps = self.engine.aps
        if aps is None or not job.enabled:
            return
        upcoming = job_next_run(job, self.clock.now())
        if upcoming is None:
            return
        trigger = to_trigger(schedule_of(job), job_zone(job), anchor=job.anchor_at)
        aps.add_job(
            self._fire,
            trigger,
            args=[job.id],
            id=cron_job_id(job.id),
            name=f"cron #{job.id}",
            next_run_time=upcoming,
            replace_existing=True,
        )

    def unschedule(self, job_id: int) -> None:
        self.engine.remove_job(cron_job_id(job_id))

    async def sync(self) -> int:
        """Follow job edits another instance stored (a cluster's leader runs the scheduler while
        the chats that edit jobs may run elsewhere): a job whose schedule changed is scheduled
        anew, a deleted one is dropped; how many changed. Unchanged jobs keep their entries."""
        jobs = {job.id: job for job in await self.jobs.list_jobs() if job.id is not None}
        changed = 0
        for job_id in self._known.keys() - jobs.keys():
            self.unschedule(job_id)
            del self._known[job_id]
            changed += 1
        for job_id, job in jobs.items():
            if self._known.get(job_id) != _shape(job):
                self.schedule(job)
                changed += 1
        return changed

    def next_run(self, job: ScheduledJob) -> datetime | None:
        """When the job fires next, as APScheduler has it (the stored value when not scheduled)."""
        if self.engine.aps is not None and job.id is not None:
            entry = self.engine.aps.get_job(cron_job_id(job.id))
            if entry is not None and entry.next_run_time is not None:
                return entry.next_run_time  # type: ignore[no-any-return]
        return job.next_run_at if job.enabled else None

    def job_value(self, job: ScheduledJob) -> Job:
        """The row as the chat and the tools see it, with this side's next run and running state."""
        assert job.id is not None
        return job_value(
            job, next_run=self.next_run(job), running=self.is_running(job.id), now=self.clock.now()
        )

    async def _fire(self, job_id: int) -> None:
        """APScheduler's entry; it lasts as long as the run (``max_instances=1``)."""
        await self.engine.await_quietly(self.engine.spawn(self.fire(job_id)))

    async def fire(self, job_id: int) -> None:
        """A fire of the job: the fire time it stands for is decided by the one misfire rule,
        then run (until the run ends) or recorded missed, once across instances."""
        job = await self.jobs.get(job_id)
        if job is None or not job.enabled:
            return
        decision = job_misfire(job, self.clock.now(), self.ports.scheduler.misfire_grace)
        if isinstance(decision, RecordMissed):
            await self._record_missed(job_id, decision.fire_time)
            return
        if not isinstance(decision, RunNow):
            return
        task = self.launch(job_id, scheduled_for=decision.fire_time)
        if task is None:  # a manual run is still going: this fire time is missed
            await self._record_missed(job_id, decision.fire_time)
            return
        await asyncio.wait({task})

    async def _record_missed(self, job_id: int, fire_time: datetime) -> None:
        run = await self.jobs.record_missed(job_id, fire_time)
        if run is None:
            _slot_taken(job_id, fire_time)
            return
        self._notify(run)

    # --- one run -------------------------------------------------------------------------

    def is_running(self, job_id: int) -> bool:
        return job_id in self._running

    def launch(self, job_id: int, *, scheduled_for: datetime | None) -> asyncio.Task[Any] | None:
        """Start a run unless one of this job is in flight (reserved before any await)."""
        if job_id in self._running:
            return None
        active = ActiveRun(job_id=job_id, manual=scheduled_for is None)
        self._running[job_id] = active
        return self.engine.spawn(self._run_job(active, scheduled_for=scheduled_for))

    async def _run_job(self, active: ActiveRun, *, scheduled_for: datetime | None) -> None:
        try:
            job = await self.jobs.get(active.job_id)
            if job is None:
                return
            run = await self.jobs.start_run(active.job_id, scheduled_for=scheduled_for)
            if run is None:
                assert scheduled_for is not None, "a manual run has no slot to find taken"
                _slot_taken(active.job_id, scheduled_for)
                return
            assert run.id is not None
            active.run_id = run.id
            started = time.monotonic()
            session, outcome = await self._run_session(job, active)
        finally:
            self._running.pop(active.job_id, None)
        took = time.monotonic() - started
        status = run_result(outcome).status
        log.info(
            "cron job %s %r run=%s outcome=%s took=%.2fs",
            active.job_id,
            job.title,
            run.id,
            status,
            took,
            extra={"job": active.job_id, "run": run.id, "outcome": str(status), "took": round(took, 3)},
        )
        await durable(self._finish_run(job, run.id, session, outcome))

    async def _run_session(
        self, job: ScheduledJob, active: ActiveRun
    ) -> tuple[ChatSession | None, TurnOutcome]:
        """The run's headless session and what its turn came to.

        Cancellation (shutdown) propagates and leaves the row ``running``, so
        the run is redone after the restart.
        """
        assert active.run_id is not None
        session: ChatSession | None = None
        try:
            session = await self.ports.sessions.create_headless(
                SessionSource.CRON,
                job.chat_id,
                auto_deny=job.approvals != JobApprovals.ASK,
                thread_id=job.thread_id,  # its output and approval prompts go to the job's topic
            )
            session_id = session.id
            assert session_id is not None
            await self.jobs.attach_session(active.run_id, session_id)
            text = cron_input(job, self.clock.now(), manual=active.manual)
            body = ScheduledTurnBody(job="cron", job_id=active.job_id, text=text)
            outcome = await self.turns.run(
                session, body, f"cron-run:{active.run_id}", lambda: self._posted(active, session_id)
            )
            return session, outcome
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("cron job %s failed to run", active.job_id)
            return session, failure(exc)

    async def _posted(self, active: ActiveRun, session_id: int) -> None:
        active.session_id = session_id
        if active.killed:  # killed before its mail was in
            await self._stop_session(active)

    async def _finish_run(
        self, job: ScheduledJob, run_id: int, session: ChatSession | None, outcome: TurnOutcome
    ) -> None:
        result = run_result(outcome)
        try:
            run = await self.jobs.finish_run(
                run_id, result.status, final_response=result.response, error=result.error
            )
        except ValueError:  # the job was deleted while it ran
            return
        if result.status != JobRunStatus.CANCELLED:  # a kill is answered by the command itself
            language = await self._language(job.chat_id, job.thread_id)
            await self.delivery.deliver(
                job.chat_id,
                CronResult(title=job.title, body=result_body(result)),
                thread_id=job.thread_id,
                session_id=session.id if session is not None else None,
                language=language,
            )
        refreshed = await self.jobs.get(job.id or 0)
        if refreshed is not None:
            self.schedule(refreshed)  # a one-shot is now disabled; others keep their entry
        self._notify(run)

    # --- kill ----------------------------------------------------------------------------

    async def kill(self, job_id: int) -> bool:
        """Cancel a running job's session at once (the /stop path); ``False`` if it isn't running."""
        active = self._running.get(job_id)
        if active is None or active.killed:
            return False
        active.killed = True
        if active.session_id is not None:
            await self._stop_session(active)
        return True

    async def _stop_session(self, active: ActiveRun) -> None:
        session_id = active.session_id
        assert session_id is not None
        stop = Envelope(
            id=f"cron-kill:{active.run_id}",
            session_id=session_id,
            sender=Sender(kind=SenderKind.USER),
            priority=Priority.INTERRUPT,
            body=ControlBody(action=ControlAction.STOP),
        )
        if not await self.ports.turns.stop(stop):
            # no turn yet: the stop mail drops the scheduled one, so no turn will finish
            self.turns.resolve(session_id, Cancelled())

    # --- helpers -------------------------------------------------------------------------

    async def _language(self, chat_id: int, thread_id: int) -> str | None:
        """The language the chat's user last wrote in (``None``: the default), where the job was
        made (a forum topic's session, which exists: the job came from it)."""
        session = await self.ports.chat_session(chat_id, user_id=None, language=None, thread_id=thread_id)
        return session.language_code

    def _notify(self, run: JobRun) -> None:
        for listener in list(self.listeners):
            listener(run)


def _slot_taken(job_id: int, fire_time: datetime) -> None:
    log.debug(
        "cron job %s: fire time %s has a row already (run or missed elsewhere or before); not run again",
        job_id,
        fire_time.isoformat(),
        extra={"job": job_id},
    )
