"""The running scheduler: APScheduler fires tics and cron jobs; each run is mail.

:class:`SchedulerService` is what the runtime, the chat commands and the
agent's tools hold. It composes the parts, each in its own module:

* :mod:`.engine` — the APScheduler instance (rebuilt from the database, the
  source of truth, on :meth:`~SchedulerService.start`) and the tasks it starts;
* :mod:`.headless` — posting a run's mail to a headless session and waiting
  for its turn; settling the headless turns a crash cut short;
* :mod:`.cron_runner` — cron jobs: entries, fire times, missed and
  interrupted runs, one run, kill;
* :mod:`.tic_runner` — tics: when one runs, quiet hours, deferral behind the
  user's turn, skipping without the model, the report;
* :mod:`.delivery` — results as reports, silent or held during quiet hours.

The job methods here check that a job belongs to the asking chat before the
cron side acts on it. The service is built from :class:`~.ports.SchedulerPorts`
(never the runtime itself) and hands out values (:mod:`.values`), never rows.
It renders nothing: what the chat sees is a :class:`~runtime.events.Report`.
"""

from __future__ import annotations

import uuid

from agentgram.runtime.core.turn.outcome import TurnOutcome
from agentgram.runtime.infra.storage.scheduler_rows import ScheduledJob
from agentgram.runtime.scheduler.clock import Clock, SystemClock
from agentgram.runtime.scheduler.cron_runner import ActiveRun, CronRunner
from agentgram.runtime.scheduler.delivery import Delivery
from agentgram.runtime.scheduler.engine import Engine
from agentgram.runtime.scheduler.headless import HeadlessTurns, settle_headless_leftovers
from agentgram.runtime.scheduler.held import HeldReports
from agentgram.runtime.scheduler.jobs import JobChanges, JobNotFound, JobStore
from agentgram.runtime.scheduler.part import Shared
from agentgram.runtime.scheduler.plan import TicPlan
from agentgram.runtime.scheduler.ports import SchedulerPorts
from agentgram.runtime.scheduler.schedule import ScheduleError
from agentgram.runtime.scheduler.tic import Run, TicDecision
from agentgram.runtime.scheduler.tic_runner import TicRunner, TicStatus
from agentgram.runtime.scheduler.tic_store import TicStore
from agentgram.runtime.scheduler.values import HomeChat, Job, JobSpec

REQUEST = "scheduler.request:"
"""Key prefix of what a cluster's instance asks the scheduler's instance to do (``run``, ``kill``,
``tic``), carried out at the leader's next :meth:`SchedulerService.sync`."""


class SchedulerService:
    def __init__(self, ports: SchedulerPorts, *, clock: Clock | None = None) -> None:
        self.ports = ports
        self.clock: Clock = clock or SystemClock()
        self.jobs = JobStore(ports.db, self.clock, default_timezone=ports.timezone_name)
        self.tics = TicStore(ports.db, self.clock)
        self.held = HeldReports(ports.sessions)
        self.engine = Engine()
        shared = Shared(ports, self.engine, self.clock)
        self.turns = HeadlessTurns(ports)
        self.delivery = Delivery(shared, self.held)
        self.cron = CronRunner(shared, self.turns, self.delivery, self.jobs)
        self.ticker = TicRunner(shared, self.turns, self.tics)
        self.run_listeners = self.cron.listeners
        """Told after every finished (or missed) cron run; tests wait on it."""
        self.shared = False
        """A cluster's instances share the chats and one of them runs the scheduler: set on each
        (``Runtime.start``); until this one runs it, "run now" and "kill" go to the leader."""
        self.tic_listeners = self.ticker.listeners
        """Told after every tic decision that ended (skipped, deferred, delivered, silent, failed)."""

    # --- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Settle what a crash left, catch up on missed runs, then start firing.

        Called before the runtime resumes interrupted turns, so a tic or cron
        turn a crash cut short is failed here instead of resumed there. From
        here until :meth:`stop` the service hears of every finished turn. The
        catch-up goes through the slots' insert-once rows, so a new leader never
        runs a slot the previous one ran or recorded missed.
        """
        if self._on_turn_finished not in self.ports.turns.finish_listeners:
            self.ports.turns.finish_listeners.append(self._on_turn_finished)
        await settle_headless_leftovers(self.ports)
        interrupted = await self.cron.interrupted()
        await self.ticker.settle_open()
        self.engine.start(self.ports.timezone, self.ports.scheduler.misfire_grace)
        await self.ticker.catch_up()
        await self.cron.resume(interrupted)
        await self.ticker.reschedule(starting=True)
        await self.delivery.schedule_flush(await self.delivery.held_until())

    async def stop(self) -> None:
        """Stop firing; runs in flight stay ``running`` and are re-run after the restart.

        :meth:`Runtime.close` stops it first, before the session hub, so nothing new is
        posted while the consumers stop. Idempotent.
        """
        await self.engine.stop()
        if self._on_turn_finished in self.ports.turns.finish_listeners:
            self.ports.turns.finish_listeners.remove(self._on_turn_finished)

    async def sync(self) -> None:
        """A cluster's leader follows what other instances changed: job edits and the tic's
        plan (they are stored; only this instance's APScheduler fires them)."""
        if self.engine.aps is None:
            return  # not running here
        await self.cron.sync()
        await self.ticker.sync()
        await self._carry_out_requests()

    def _on_turn_finished(self, session_id: int, turn_id: int, outcome: TurnOutcome) -> None:
        self.turns.resolve(session_id, outcome)
        self.ticker.turn_finished(session_id)

    # --- cron: what the chat and the agent's tools call ---------------------------------

    async def add_job(self, spec: JobSpec) -> Job:
        """Store and schedule; :class:`ScheduleError` for a bad schedule or zone."""
        row = await self.jobs.add(spec)
        self.cron.schedule(row)
        return self.cron.job_value(row)

    async def job(self, job_id: int, *, chat_id: int | None = None) -> Job:
        """The job, if it exists and (given ``chat_id``) belongs to that chat; else :class:`JobNotFound`."""
        return self.cron.job_value(await self._row(job_id, chat_id=chat_id))

    async def list_jobs(self, chat_id: int | None = None) -> list[Job]:
        return [self.cron.job_value(row) for row in await self.jobs.list_jobs(chat_id=chat_id)]

    async def update_job(self, job_id: int, changes: JobChanges, *, chat_id: int | None = None) -> Job:
        await self._row(job_id, chat_id=chat_id)
        row = await self.jobs.update(job_id, changes)
        self.cron.schedule(row)
        return self.cron.job_value(row)

    async def set_enabled(self, job_id: int, enabled: bool, *, chat_id: int | None = None) -> Job:
        await self._row(job_id, chat_id=chat_id)
        row = await self.jobs.set_enabled(job_id, enabled)
        self.cron.schedule(row)
        return self.cron.job_value(row)

    async def delete_job(self, job_id: int, *, chat_id: int | None = None) -> None:
        await self._row(job_id, chat_id=chat_id)
        await self.cron.kill(job_id)
        self.cron.unschedule(job_id)
        await self.jobs.delete(job_id)

    def is_running(self, job_id: int) -> bool:
        """Whether a run of the job is in flight now (a :class:`Job`'s ``running`` is as it was read)."""
        return self.cron.is_running(job_id)

    async def run_now(self, job_id: int, *, chat_id: int | None = None) -> bool:
        """Start a manual run (no fire time used up); ``False`` if one is already running. On a
        cluster's instance that does not run the scheduler the leader is asked to (:meth:`sync`)."""
        row = await self._row(job_id, chat_id=chat_id)
        if self.elsewhere:
            if row.running_session_id is not None:
                return False  # the leader runs it now
            await self._ask_leader("run", job_id)
            return True
        return self.cron.launch(job_id, scheduled_for=None) is not None

    async def kill(self, job_id: int, *, chat_id: int | None = None) -> bool:
        """Cancel a running job's session at once (the /stop path); ``False`` if it isn't running.
        On a cluster's instance that does not run the scheduler the leader is asked to."""
        if chat_id is not None:
            await self._row(job_id, chat_id=chat_id)
        if self.elsewhere:
            row = await self.jobs.get(job_id)
            if row is None or row.running_session_id is None:
                return False
            await self._ask_leader("kill", job_id)
            return True
        return await self.cron.kill(job_id)

    @property
    def elsewhere(self) -> bool:
        """This process shares a cluster's chats and another instance runs the scheduler."""
        return self.shared and self.engine.aps is None

    async def _ask_leader(self, what: str, job_id: int) -> None:
        """A request the leader carries out at its next :meth:`sync` (within a poll's period)."""
        await self.ports.sessions.set_value(f"{REQUEST}{what}:{job_id}:{uuid.uuid4().hex}", what)

    async def _carry_out_requests(self) -> None:
        for key, what in (await self.ports.sessions.values_with_prefix(REQUEST)).items():
            await self.ports.sessions.delete_value(key)
            job_id = int(key[len(REQUEST) :].split(":")[1])
            if what == "run":
                self.cron.launch(job_id, scheduled_for=None)
            elif what == "kill":
                await self.cron.kill(job_id)
            elif what == "tic":
                self.engine.spawn(self.ticker.tic(manual=True))

    async def _row(self, job_id: int, *, chat_id: int | None) -> ScheduledJob:
        row = await self.jobs.get(job_id)
        if row is None or (chat_id is not None and row.chat_id != chat_id):
            raise JobNotFound(job_id)
        return row

    # --- tics -------------------------------------------------------------------------

    async def tic(self, *, manual: bool = False) -> TicDecision:
        """A tic now (``/tic now``); on a cluster's instance that does not run the scheduler the
        leader is asked to run it (what it decides reaches the home chat as any tic's report)."""
        if self.elsewhere:
            await self._ask_leader("tic", 0)
            return Run()
        return await self.ticker.tic(manual=manual)

    async def tic_plan(self) -> TicPlan:
        return await self.ticker.plan()

    async def reschedule_tic(self) -> TicPlan:
        return await self.ticker.reschedule()

    async def set_tic_enabled(self, enabled: bool) -> TicPlan:
        return await self.ticker.set_enabled(enabled)

    async def set_tic_interval(self, text: str) -> TicPlan:
        return await self.ticker.set_interval(text)

    async def tic_status(self) -> TicStatus:
        return await self.ticker.status()

    async def home_session(self) -> HomeChat:
        return await self.ticker.home_session()

    async def pending_events(self) -> list[str]:
        return await self.ticker.pending_events()

    # --- delivery ----------------------------------------------------------------------

    async def flush_held(self) -> int:
        return await self.delivery.flush_held()


__all__ = ["ActiveRun", "JobNotFound", "ScheduleError", "SchedulerService", "TicStatus"]
