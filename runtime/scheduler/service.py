"""The running scheduler: APScheduler fires tics and cron jobs; each run is mail.

:class:`SchedulerService` owns one APScheduler 3 ``AsyncIOScheduler`` whose
in-memory jobs are rebuilt from the database on :meth:`~SchedulerService.start`
(the database is the source of truth). Every APScheduler job has
``max_instances=1`` and ``coalesce=True``; what to do about fire times missed
while the bot was down is decided once per job by
:func:`~runtime.scheduler.jobs.job_misfire` (``scheduler.misfire_grace``), and
a run a crash interrupted is recorded failed ("interrupted by restart") and
re-run once.

A run never calls the turn loop: it creates an ephemeral headless session
(source ``cron`` or ``tic``) and accepts a ``ScheduledTurnBody`` into its
mailbox; the session hub starts the turn. The outcome comes back through
``hub.finish_listeners``; the run's row is then finished and the result sent
to the chat as a :class:`~runtime.events.Report` — silently during quiet
hours, or held for one digest when they end (``quiet_hours.hold``).

Tics call the model only when there is something to look at, never during
quiet hours, and never while the home chat's own turn runs (they wait for it
to finish, then run). A tic whose reply is ``TIC_OK`` or empty says nothing;
a delivered tic report is also appended to the home chat's conversation as a
synthetic assistant message, so the main agent knows what it told the user.
``/tic now`` is asked for by a user who is plainly awake, so it ignores quiet
hours (but still skips when there is nothing to look at).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlmodel import col, select

from runtime.events import Address, Report
from runtime.i18n import Translator
from runtime.log import get_logger
from runtime.mailbox import (
    ControlAction,
    ControlBody,
    Envelope,
    Priority,
    ScheduledTurnBody,
    Sender,
    SenderKind,
)
from runtime.scheduler.clock import Clock, SystemClock
from runtime.scheduler.held import HeldReports
from runtime.scheduler.jobs import (
    INTERRUPTED,
    JobChanges,
    JobNotFound,
    JobStore,
    job_misfire,
    job_next_run,
    job_zone,
    schedule_of,
)
from runtime.scheduler.misfire import RecordMissed, RunNow
from runtime.scheduler.models import (
    JobApprovals,
    JobRun,
    JobRunStatus,
    ScheduledJob,
    TicRun,
    TicRunStatus,
)
from runtime.scheduler.plan import (
    HeldReport,
    Hold,
    TicPlan,
    cron_event,
    held_digest,
    plan_delivery,
    run_result,
    short,
    tic_plan,
)
from runtime.scheduler.schedule import (
    MIN_INTERVAL,
    IntervalSchedule,
    ScheduleError,
    parse_schedule,
    to_trigger,
)
from runtime.scheduler.tic import (
    DeferBusy,
    Run,
    TicDecision,
    build_tic_input,
    decide_tic,
    is_tic_ok,
    read_tic_md,
    tic_has_work,
)
from runtime.scheduler.tic_store import TicStore
from runtime.storage.db import durable
from runtime.storage.models import ChatSession, SessionSource, ToolCallStatus, TurnStatus
from runtime.turn.outcome import Cancelled, Failed, Final, TurnOutcome

if TYPE_CHECKING:
    from runtime.app import Runtime

log = get_logger("scheduler")

TIC_JOB = "tic"
FLUSH_JOB = "held-flush"
HEADLESS = (SessionSource.TIC.value, SessionSource.CRON.value)


def _cron_job_id(job_id: int) -> str:
    return f"cron-{job_id}"


@dataclass(slots=True)
class ActiveRun:
    """A cron run in flight; ``session_id`` is set once its mail is accepted."""

    job_id: int
    run_id: int | None = None
    session_id: int | None = None
    killed: bool = False


@dataclass(frozen=True, slots=True)
class TicStatus:
    plan: TicPlan
    next_run: datetime | None
    last: TicRun | None


class SchedulerService:
    def __init__(self, runtime: Runtime, *, clock: Clock | None = None) -> None:
        self.runtime = runtime
        self.clock: Clock = clock or SystemClock()
        self.settings = runtime.settings
        self.jobs = JobStore(runtime.db, self.clock, default_timezone=runtime.timezone_name)
        self.tics = TicStore(runtime.db, self.clock)
        self.held = HeldReports(runtime.sessions)
        self.translator = Translator(default=self.settings.locale.default)
        self.run_listeners: list[Callable[[JobRun], None]] = []
        """Told after every finished (or missed) cron run; tests wait on it."""
        self.tic_listeners: list[Callable[[TicRun], None]] = []
        """Told after every tic decision that ended (skipped, deferred, delivered, silent, failed)."""
        self._aps: AsyncIOScheduler | None = None
        self._waiting: dict[int, asyncio.Future[TurnOutcome]] = {}
        self._running: dict[int, ActiveRun] = {}
        self._tic_running = False
        self._tic_task: asyncio.Task[Any] | None = None
        self._tic_deferred_for: int | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        runtime.hub.finish_listeners.append(self._on_turn_finished)

    # --- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Settle what a crash left, catch up on missed runs, then start firing.

        Called before the runtime resumes interrupted turns, so a tic or cron
        turn a crash cut short is failed here instead of resumed there.
        """
        await self._settle_headless_leftovers()
        interrupted = {job.id for job in await self.jobs.interrupted_runs() if job.enabled}
        await self._settle_open_tics()
        grace = self.settings.scheduler.misfire_grace
        self._aps = AsyncIOScheduler(
            timezone=self.runtime.timezone,
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": max(1, int(grace))},
        )
        self._aps.start()
        for job in await self.jobs.list_jobs(enabled=True):  # a job paused since is not re-run
            await self._catch_up(job, rerun=job.id in interrupted)
        for job in await self.jobs.list_jobs(enabled=True):
            self._schedule(job)
        await self.reschedule_tic()
        await self._schedule_flush(await self._held_until())

    async def stop(self) -> None:
        """Stop firing; runs in flight stay ``running`` and are re-run after the restart.

        Idempotent: the Telegram adapter stops the scheduler before the session
        hub (so nothing new is posted), and :meth:`Runtime.close` again.
        """
        if self._aps is not None and self._aps.running:
            self._aps.shutdown(wait=False)
        self._aps = None
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)  # let APScheduler's deferred shutdown run on this loop

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("scheduled work failed", exc_info=task.exception())

    async def _settle_headless_leftovers(self) -> None:
        """Tic and cron turns a crash cut short end as failed; their unread mail is dropped."""
        rt = self.runtime
        for turn in await rt.sessions.open_turns():
            session = await rt.sessions.get(turn.session_id)
            if session is None or session.source not in HEADLESS:
                continue
            await rt.history.close_open_calls(turn.session_id, ToolCallStatus.FAILED, INTERRUPTED)
            await rt.approvals.cancel_session(turn.session_id)
            await rt.sessions.finish_turn(turn.id or 0, TurnStatus.FAILED, INTERRUPTED)
        for session_id in await rt.sessions.sessions_with_mail():
            session = await rt.sessions.get(session_id)
            if session is None or session.source not in HEADLESS:
                continue
            unread = await rt.mailbox.unread(session_id)
            if unread:
                async with rt.db.write() as tx:
                    await rt.mailbox.advance(tx, session_id, max(e.seq for e in unread))

    async def _settle_open_tics(self) -> None:
        async with self.runtime.db.read() as tx:
            rows = await tx.exec(
                select(TicRun).where(TicRun.status == TicRunStatus.RAN, col(TicRun.ended_at).is_(None))
            )
            open_ids = [row.id or 0 for row in rows.all()]
        for tic_id in open_ids:
            await self.tics.finish(tic_id, delivered=False, failed=True, reason=INTERRUPTED)

    # --- cron: APScheduler side ------------------------------------------------------

    async def _catch_up(self, job: ScheduledJob, *, rerun: bool) -> None:
        """On start: run a recent missed fire time once, record an old one as missed."""
        assert job.id is not None
        decision = job_misfire(job, self.clock.now(), self.settings.scheduler.misfire_grace)
        fire: datetime | None = None
        if isinstance(decision, RunNow):
            fire = decision.fire_time
        elif isinstance(decision, RecordMissed):
            self._notify_run(await self.jobs.record_missed(job.id, decision.fire_time))
        if fire is not None or rerun:
            self._launch(job.id, scheduled_for=fire)

    def _schedule(self, job: ScheduledJob) -> None:
        """(Re)place the job's APScheduler entry; a paused or finished job has none."""
        assert job.id is not None
        self._unschedule(job.id)
        if self._aps is None or not job.enabled:
            return
        upcoming = job_next_run(job, self.clock.now())
        if upcoming is None:
            return
        trigger = to_trigger(schedule_of(job), job_zone(job), anchor=job.anchor_at)
        self._aps.add_job(
            self._fire_cron,
            trigger,
            args=[job.id],
            id=_cron_job_id(job.id),
            name=f"cron #{job.id}",
            next_run_time=upcoming,
            replace_existing=True,
        )

    def _unschedule(self, job_id: int) -> None:
        if self._aps is not None and self._aps.get_job(_cron_job_id(job_id)) is not None:
            self._aps.remove_job(_cron_job_id(job_id))

    async def _fire_cron(self, job_id: int) -> None:
        """APScheduler's entry; it lasts as long as the run (``max_instances=1``)."""
        await self._await_quietly(self._spawn(self._cron_fired(job_id)))

    async def _cron_fired(self, job_id: int) -> None:
        """The fire time this run stands for is decided by the one misfire rule."""
        job = await self.jobs.get(job_id)
        if job is None or not job.enabled:
            return
        decision = job_misfire(job, self.clock.now(), self.settings.scheduler.misfire_grace)
        if isinstance(decision, RecordMissed):
            self._notify_run(await self.jobs.record_missed(job_id, decision.fire_time))
            return
        if not isinstance(decision, RunNow):
            return
        task = self._launch(job_id, scheduled_for=decision.fire_time)
        if task is None:  # a manual run is still going: this fire time is missed
            self._notify_run(await self.jobs.record_missed(job_id, decision.fire_time))
            return
        await asyncio.wait({task})

    @staticmethod
    async def _await_quietly(task: asyncio.Task[Any]) -> None:
        """APScheduler's job functions wait here for the tracked task doing the work.

        On shutdown APScheduler cancels the job function; the work itself is
        cancelled by :meth:`stop`, so the job function just ends instead of
        being logged as a failed job.
        """
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})

    # --- cron: one run ----------------------------------------------------------------

    def _launch(self, job_id: int, *, scheduled_for: datetime | None) -> asyncio.Task[Any] | None:
        """Start a run unless one of this job is in flight (reserved before any await)."""
        if job_id in self._running:
            return None
        active = ActiveRun(job_id=job_id)
        self._running[job_id] = active
        return self._spawn(self._run_job(active, scheduled_for=scheduled_for))

    async def _run_job(self, active: ActiveRun, *, scheduled_for: datetime | None) -> None:
        try:
            job = await self.jobs.get(active.job_id)
            if job is None:
                return
            run = await self.jobs.start_run(active.job_id, scheduled_for=scheduled_for)
            assert run.id is not None
            active.run_id = run.id
            session, outcome = await self._run_session(job, active)
        finally:
            self._running.pop(active.job_id, None)
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
            session = await self.runtime.sessions.create_headless(
                SessionSource.CRON, job.chat_id, auto_deny=job.approvals != JobApprovals.ASK
            )
            assert session.id is not None
            await self.jobs.attach_session(active.run_id, session.id)
            body = ScheduledTurnBody(job="cron", job_id=active.job_id, text=job.prompt)
            return session, await self._turn(session, body, f"cron-run:{active.run_id}", active)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("cron job %s failed to run", active.job_id)
            return session, _failed(exc)

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
            language = await self._language(job.chat_id)
            title = self._t(language, "cron-result-title", title=job.title)
            if result.status == JobRunStatus.SUCCESS:
                text = (result.response or "").strip() or self._t(language, "cron-no-output")
            else:
                text = self._t(language, "cron-run-failed", error=short(result.error or "", 300))
            await self._deliver(job.chat_id, title, text, session=session, language=language)
        refreshed = await self.jobs.get(job.id or 0)
        if refreshed is not None:
            self._schedule(refreshed)  # a one-shot is now disabled; others keep their entry
        self._notify_run(run)

    async def _turn(
        self, session: ChatSession, body: ScheduledTurnBody, envelope_id: str, active: ActiveRun | None = None
    ) -> TurnOutcome:
        """Post the scheduled mail and wait for the hub to finish the turn it starts."""
        assert session.id is not None
        future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        self._waiting[session.id] = future
        try:
            await self.runtime.mailbox.accept(
                Envelope(
                    id=envelope_id,
                    session_id=session.id,
                    sender=Sender(kind=SenderKind.SYSTEM, ref=body.job),
                    body=body,
                )
            )
            if active is not None:
                active.session_id = session.id
                if active.killed:  # killed before its mail was in
                    await self._stop_session(active)
            return await future
        finally:
            self._waiting.pop(session.id, None)

    def _on_turn_finished(self, session_id: int, turn_id: int, outcome: TurnOutcome) -> None:
        future = self._waiting.get(session_id)
        if future is not None and not future.done():
            future.set_result(outcome)
        if self._tic_deferred_for == session_id and self._aps is not None:
            self._tic_deferred_for = None
            self._spawn(self.tic())

    # --- cron: what the chat and the agent's tools call ---------------------------------

    async def add_job(
        self,
        *,
        title: str,
        schedule: str,
        prompt: str,
        chat_id: int,
        timezone: str | None = None,
        approvals: JobApprovals = JobApprovals.DENY,
    ) -> ScheduledJob:
        """Store and schedule; :class:`ScheduleError` for a bad schedule or zone."""
        job = await self.jobs.add(
            title=title,
            schedule=schedule,
            prompt=prompt,
            chat_id=chat_id,
            timezone=timezone,
            approvals=approvals,
        )
        self._schedule(job)
        return job

    async def job(self, job_id: int, *, chat_id: int | None = None) -> ScheduledJob:
        """The job, if it exists and (given ``chat_id``) belongs to that chat; else :class:`JobNotFound`."""
        job = await self.jobs.get(job_id)
        if job is None or (chat_id is not None and job.chat_id != chat_id):
            raise JobNotFound(job_id)
        return job

    async def list_jobs(self, chat_id: int | None = None) -> list[ScheduledJob]:
        return await self.jobs.list_jobs(chat_id=chat_id)

    async def update_job(
        self, job_id: int, changes: JobChanges, *, chat_id: int | None = None
    ) -> ScheduledJob:
        await self.job(job_id, chat_id=chat_id)
        job = await self.jobs.update(job_id, changes)
        self._schedule(job)
        return job

    async def set_enabled(self, job_id: int, enabled: bool, *, chat_id: int | None = None) -> ScheduledJob:
        await self.job(job_id, chat_id=chat_id)
        job = await self.jobs.set_enabled(job_id, enabled)
        self._schedule(job)
        return job

    async def delete_job(self, job_id: int, *, chat_id: int | None = None) -> None:
        await self.job(job_id, chat_id=chat_id)
        await self.kill(job_id)
        self._unschedule(job_id)
        await self.jobs.delete(job_id)

    def next_run(self, job: ScheduledJob) -> datetime | None:
        """When the job fires next, as APScheduler has it (the stored value when not scheduled)."""
        if self._aps is not None and job.id is not None:
            entry = self._aps.get_job(_cron_job_id(job.id))
            if entry is not None and entry.next_run_time is not None:
                return entry.next_run_time  # type: ignore[no-any-return]
        return job.next_run_at if job.enabled else None

    def is_running(self, job_id: int) -> bool:
        return job_id in self._running

    async def run_now(self, job_id: int, *, chat_id: int | None = None) -> bool:
        """Start a manual run (no fire time used up); ``False`` if one is already running."""
        await self.job(job_id, chat_id=chat_id)
        return self._launch(job_id, scheduled_for=None) is not None

    async def kill(self, job_id: int, *, chat_id: int | None = None) -> bool:
        """Cancel a running job's session at once (the /stop path); ``False`` if it isn't running."""
        if chat_id is not None:
            await self.job(job_id, chat_id=chat_id)
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
        hub = self.runtime.hub
        was_running = hub.cancel_turn(session_id)
        await self.runtime.mailbox.accept(
            Envelope(
                id=f"cron-kill:{active.run_id}",
                session_id=session_id,
                sender=Sender(kind=SenderKind.USER),
                priority=Priority.INTERRUPT,
                body=ControlBody(action=ControlAction.STOP),
            )
        )
        if not was_running and not hub.cancel_turn(session_id):
            # no turn yet: the stop mail drops the scheduled one, so no turn will finish
            future = self._waiting.get(session_id)
            if future is not None and not future.done():
                future.set_result(Cancelled())

    def _notify_run(self, run: JobRun) -> None:
        for listener in list(self.run_listeners):
            listener(run)

    # --- tics -------------------------------------------------------------------------

    async def tic_plan(self) -> TicPlan:
        return tic_plan(self.settings.tic, await self.tics.state(), self.runtime.timezone, self.clock.now())

    async def reschedule_tic(self) -> TicPlan:
        plan = await self.tic_plan()
        if self._aps is None:
            return plan
        if self._aps.get_job(TIC_JOB) is not None:
            self._aps.remove_job(TIC_JOB)
        if plan.enabled:
            if isinstance(plan.schedule, IntervalSchedule):
                trigger: Any = IntervalTrigger(seconds=plan.schedule.seconds, timezone=self.runtime.timezone)
            else:
                trigger = to_trigger(plan.schedule, self.runtime.timezone)
            self._aps.add_job(self._fire_tic, trigger, id=TIC_JOB, name="tic", replace_existing=True)
        return plan

    async def set_tic_enabled(self, enabled: bool) -> TicPlan:
        await self.tics.set_state(enabled=enabled)
        return await self.reschedule_tic()

    async def set_tic_interval(self, text: str) -> TicPlan:
        """``/tic every 45m``: :class:`ScheduleError` unless it is an interval of at least a minute."""
        schedule = parse_schedule(
            f"every {text}", self.runtime.timezone, self.clock.now(), min_interval=MIN_INTERVAL
        )
        assert isinstance(schedule, IntervalSchedule)
        await self.tics.set_state(interval_seconds=schedule.seconds, cron=None)
        return await self.reschedule_tic()

    async def tic_status(self) -> TicStatus:
        entry = self._aps.get_job(TIC_JOB) if self._aps is not None else None
        upcoming = entry.next_run_time if entry is not None else None
        return TicStatus(plan=await self.tic_plan(), next_run=upcoming, last=await self.tics.last())

    async def _fire_tic(self) -> None:
        await self._await_quietly(self._spawn(self._tic_fired()))

    async def _tic_fired(self) -> None:
        decision = await self.tic()
        if isinstance(decision, Run) and self._tic_task is not None:
            await asyncio.wait({self._tic_task})

    async def home_session(self) -> ChatSession:
        """The chat tics report to: ``tic.chat_id``, else the first allowed user."""
        allowed = self.settings.telegram.allowed_user_ids
        chat_id = self.settings.tic.chat_id or allowed[0]
        user_id = chat_id if chat_id in allowed else None
        return await self.runtime.chat_session(chat_id, user_id=user_id, language=None)

    async def tic(self, *, manual: bool = False) -> TicDecision:
        """Decide one tic now and start it if it should run; the decision is recorded."""
        if self._tic_running:
            return Run()  # the tic in flight answers this one too; nothing recorded
        home = await self.home_session()
        assert home.id is not None
        now = self.clock.now()
        tic_md = read_tic_md(self.runtime.workdir)
        prompt = self.settings.tic.prompt
        events = await self.pending_events()
        quiet = None if manual else self.settings.quiet_hours.range
        decision = decide_tic(
            now,
            quiet,
            self.runtime.timezone,
            user_turn_running=self.runtime.hub.is_busy(home.id),
            has_work=tic_has_work(tic_md, prompt, events),
        )
        if isinstance(decision, DeferBusy):
            self._tic_deferred_for = home.id  # set before any await: the turn may end meanwhile
        if not isinstance(decision, Run):
            return await self._record_tic(decision)
        self._tic_running = True
        text = build_tic_input(
            now, self.runtime.timezone, prompt=prompt, tic_md=tic_md, pending_events=events
        ).render()
        self._tic_task = self._spawn(self._run_tic(home, text))
        return decision

    async def _record_tic(self, decision: TicDecision) -> TicDecision:
        row = await self.tics.record(decision.status, reason=decision.reason)
        self._notify_tic(row)
        return decision

    async def _run_tic(self, home: ChatSession, text: str) -> None:
        try:
            session = await self.runtime.sessions.create_headless(
                SessionSource.TIC, home.chat_id, auto_deny=True
            )
            row = await self.tics.record(TicRunStatus.RAN, session_id=session.id)
            assert row.id is not None
            try:
                outcome = await self._turn(session, ScheduledTurnBody(job="tic", text=text), f"tic:{row.id}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("tic failed to run")
                outcome = _failed(exc)
            finished = await durable(self._finish_tic(home, row.id, outcome))
        finally:
            self._tic_running = False
        self._notify_tic(finished)

    async def _finish_tic(self, home: ChatSession, tic_id: int, outcome: TurnOutcome) -> TicRun:
        """Deliver the reply unless it is ``TIC_OK`` or empty, and close the tic's row."""
        reply = outcome.text.strip() if isinstance(outcome, Final) else ""
        failed = not isinstance(outcome, Final)
        deliver = not failed and not is_tic_ok(reply)
        if deliver:
            await self._deliver_tic(home, reply)
        reason = run_result(outcome).error if failed else None
        return await self.tics.finish(tic_id, delivered=deliver, failed=failed, reason=reason)

    async def _deliver_tic(self, home: ChatSession, reply: str) -> None:
        assert home.id is not None and home.chat_id is not None
        title = self._t(home.language_code, "tic-report-title")
        self.runtime.bus.emit(
            Report(
                to=_address(home.id, SessionSource.TIC, home.chat_id, home.language_code),
                title=title,
                text=reply,
            )
        )
        await self.runtime.history.append_assistant(session_id=home.id, content=reply, is_synthetic=True)

    async def pending_events(self) -> list[str]:
        """Finished cron runs since the last tic that called the model (all, before the first)."""
        async with self.runtime.db.read() as tx:
            last = (
                await tx.exec(
                    select(TicRun)
                    .where(col(TicRun.status).in_([TicRunStatus.RAN, TicRunStatus.FAILED]))
                    .where(col(TicRun.session_id).is_not(None))
                    .order_by(col(TicRun.id).desc())
                    .limit(1)
                )
            ).first()
            query = (
                select(JobRun, ScheduledJob.title)
                .join(ScheduledJob, col(ScheduledJob.id) == col(JobRun.job_id))
                .where(col(JobRun.ended_at).is_not(None), JobRun.status != JobRunStatus.RUNNING)
                .order_by(col(JobRun.ended_at))
            )
            if last is not None:
                query = query.where(col(JobRun.ended_at) > last.started_at)
            rows = (await tx.exec(query)).all()
        return [cron_event(run, title, self.runtime.timezone) for run, title in rows]

    def _notify_tic(self, row: TicRun) -> None:
        for listener in list(self.tic_listeners):
            listener(row)

    # --- delivery ----------------------------------------------------------------------

    async def _deliver(
        self, chat_id: int, title: str, text: str, *, session: ChatSession | None, language: str | None
    ) -> None:
        plan = plan_delivery(self.clock.now(), self.settings.quiet_hours, self.runtime.timezone)
        if isinstance(plan, Hold):
            await self.held.add(HeldReport(chat_id=chat_id, title=title, text=text, language=language))
            await self._schedule_flush(plan.until)
            return
        session_id = (session.id or 0) if session is not None else 0
        self.runtime.bus.emit(
            Report(
                to=_address(session_id, SessionSource.CRON, chat_id, language),
                title=title,
                text=text,
                silent=plan.silent,
            )
        )

    async def _held_until(self) -> datetime | None:
        """When held results should go out: now if any are held, else never."""
        return self.clock.now() if await self.held.all() else None

    async def _schedule_flush(self, when: datetime | None) -> None:
        if self._aps is None or when is None:
            return
        self._aps.add_job(
            self._flush_held,
            DateTrigger(run_date=when + timedelta(seconds=1)),
            id=FLUSH_JOB,
            name="held results",
            replace_existing=True,
            misfire_grace_time=None,
        )

    async def flush_held(self) -> int:
        """Send what quiet hours held, one digest per chat; how many results went out.

        Still quiet (a restart, a clock jump): keep holding until the period ends.
        """
        plan = plan_delivery(self.clock.now(), self.settings.quiet_hours, self.runtime.timezone)
        if isinstance(plan, Hold):
            await self._schedule_flush(plan.until)
            return 0
        reports = await self.held.take()
        chats: dict[int, list[HeldReport]] = {}
        for report in reports:
            chats.setdefault(report.chat_id, []).append(report)
        for chat_id, items in chats.items():
            language = items[-1].language
            self.runtime.bus.emit(
                Report(
                    to=_address(0, SessionSource.CRON, chat_id, language),
                    title=self._t(language, "quiet-hours-digest-title", count=len(items)),
                    text=held_digest(items),
                )
            )
        return len(reports)

    async def _flush_held(self) -> None:
        await self.flush_held()

    # --- helpers -----------------------------------------------------------------------

    def _t(self, language: str | None, key: str, **params: str | int) -> str:
        return self.translator.t(language, key, **params)

    async def _language(self, chat_id: int) -> str | None:
        """The language the chat's user last wrote in (``None``: the default)."""
        session = await self.runtime.chat_session(chat_id, user_id=None, language=None)
        return session.language_code


def _address(session_id: int, source: str, chat_id: int, language: str | None) -> Address:
    return Address(session_id=session_id, source=source, chat_id=chat_id, language=language)


def _failed(exc: Exception) -> TurnOutcome:
    return Failed(f"{type(exc).__name__}: {exc}")


__all__ = ["ActiveRun", "JobNotFound", "ScheduleError", "SchedulerService", "TicStatus"]
