"""Tics on APScheduler: when one runs, what it is told, and where its reply goes.

Tics call the model only when there is something to look at, never during
quiet hours, and never while the home chat's own turn runs (they wait for it
to finish, then run). A tic whose reply is ``TIC_OK`` or empty says nothing;
a delivered tic report is also appended to the home chat's conversation as a
synthetic assistant message, so the main agent knows what it told the user.
``/tic now`` is asked for by a user who is plainly awake, so it ignores quiet
hours (but still skips when there is nothing to look at).

The decisions themselves are pure (:mod:`runtime.scheduler.tic`,
:mod:`runtime.scheduler.plan`); this module runs them and records each one.

**A slot is one row.** The schedule names its slots the same on every
instance (an interval is counted from :data:`TIC_ANCHOR`, not from when the
process started), and a fire stands for its slot, the newest fire time at or
before now. Its row is inserted once, before anything runs: only the instance
whose row went in acts on the slot; the other finds it taken and logs it at
debug. A fire while the previous tic still runs is recorded skipped. On start
(a new leader, or a restart) the slots passed since the newest recorded one go
by the misfire rule of cron jobs: the newest is run if it is recent
(``scheduler.misfire_grace``), else recorded missed; the older ones are folded
into it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlmodel import col, select

from agentgram.runtime.core.mailbox import ScheduledTurnBody
from agentgram.runtime.core.turn.outcome import Final, TurnOutcome
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.events import ModelText, Report, TicResult
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.models import SessionSource
from agentgram.runtime.infra.storage.scheduler_rows import (
    JobRun,
    JobRunStatus,
    ScheduledJob,
    TicRun,
    TicRunStatus,
)
from agentgram.runtime.scheduler.delivery import address
from agentgram.runtime.scheduler.headless import HeadlessTurns, failure
from agentgram.runtime.scheduler.jobs import INTERRUPTED
from agentgram.runtime.scheduler.misfire import RecordMissed, RunNow, decide_misfire, last_fire
from agentgram.runtime.scheduler.part import Part, Shared
from agentgram.runtime.scheduler.plan import TicPlan, cron_event, run_result, tic_plan
from agentgram.runtime.scheduler.schedule import MIN_INTERVAL, IntervalSchedule, parse_schedule, to_trigger
from agentgram.runtime.scheduler.tic import (
    DeferBusy,
    Run,
    TicDecision,
    build_tic_input,
    decide_tic,
    is_tic_ok,
    read_tic_md,
    tic_has_work,
)
from agentgram.runtime.scheduler.tic_store import TicStore
from agentgram.runtime.scheduler.values import HomeChat, TicRecord

log = get_logger("scheduler")

TIC_JOB = "tic"

TIC_ANCHOR = datetime(1970, 1, 1, tzinfo=UTC)
"""Where an interval's slots are counted from: the same on every instance and after every restart
(``every 30m`` ticks at :00 and :30)."""

MISSED = "missed"
"""The reason of a slot recorded skipped because it passed while no instance ran the scheduler."""

STILL_RUNNING = "the previous tic is still running"
"""The reason of a slot recorded skipped because it came while a tic ran."""


@dataclass(frozen=True, slots=True)
class TicStatus:
    plan: TicPlan
    next_run: datetime | None
    last: TicRecord | None


def tic_record(row: TicRun) -> TicRecord:
    return TicRecord(
        started_at=row.started_at,
        ended_at=row.ended_at,
        status=TicRunStatus(row.status),
        delivered=row.delivered,
        reason=row.reason,
    )


class TicRunner(Part):
    def __init__(self, shared: Shared, turns: HeadlessTurns, tics: TicStore) -> None:
        super().__init__(shared)
        self.turns = turns
        self.tics = tics
        self.listeners: list[Callable[[TicRun], None]] = []
        """Told after every tic decision that ended (skipped, deferred, delivered, silent, failed)."""
        self._running = False
        self._deferred_for: int | None = None
        self._caught_up: datetime | None = None
        """The slot the start's catch-up ran or recorded missed."""
        self._scheduled: tuple[object, ...] | None = None
        """The plan as last scheduled here (:meth:`sync` compares)."""

    # --- plan and APScheduler entry --------------------------------------------------------

    async def plan(self) -> TicPlan:
        return tic_plan(self.ports.tic, await self.tics.state(), self.ports.timezone, self.clock.now())

    async def reschedule(self, *, starting: bool = False) -> TicPlan:
        """Give the tic its APScheduler entry for the plan in force. ``starting`` (after the
        catch-up): a slot that came between the catch-up and now fires at once, so that it too
        ends as a row (APScheduler's first fire would be the slot after it)."""
        plan = await self.plan()
        aps = self.engine.aps
        if aps is None:
            return plan
        self._scheduled = (plan.enabled, plan.schedule)
        self.engine.remove_job(TIC_JOB)
        if plan.enabled:
            trigger = to_trigger(plan.schedule, self.ports.timezone, anchor=TIC_ANCHOR)
            first: dict[str, datetime] = {}
            if starting and await self._slot_passed_unrecorded(plan):
                first["next_run_time"] = datetime.now(UTC)
            aps.add_job(self._fire, trigger, id=TIC_JOB, name="tic", replace_existing=True, **first)
        return plan

    async def _slot_passed_unrecorded(self, plan: TicPlan) -> bool:
        """A slot came after the newest one recorded or taken by the catch-up (whose run, a task,
        may not have inserted its row yet)."""
        newest = await self.tics.newest_slot()
        if self._caught_up is not None and (newest is None or self._caught_up > newest):
            newest = self._caught_up
        latest = last_fire(plan.schedule, self.ports.timezone, self.clock.now(), anchor=TIC_ANCHOR)
        return newest is not None and latest is not None and latest > newest

    async def sync(self) -> None:
        """Follow a plan another instance stored (``/tic``): scheduled anew only when it changed."""
        plan = await self.plan()
        if (plan.enabled, plan.schedule) != self._scheduled:
            await self.reschedule()

    async def set_enabled(self, enabled: bool) -> TicPlan:
        await self.tics.set_state(enabled=enabled)
        return await self.reschedule()

    async def set_interval(self, text: str) -> TicPlan:
        """``/tic every 45m``: :class:`ScheduleError` unless it is an interval of at least a minute."""
        schedule = parse_schedule(
            f"every {text}", self.ports.timezone, self.clock.now(), min_interval=MIN_INTERVAL
        )
        assert isinstance(schedule, IntervalSchedule)
        await self.tics.set_state(interval_seconds=schedule.seconds, cron=None)
        return await self.reschedule()

    async def status(self) -> TicStatus:
        entry = self.engine.aps.get_job(TIC_JOB) if self.engine.aps is not None else None
        upcoming = entry.next_run_time if entry is not None else None
        last = await self.tics.last()
        return TicStatus(
            plan=await self.plan(), next_run=upcoming, last=tic_record(last) if last is not None else None
        )

    async def _fire(self) -> None:
        """APScheduler's entry; it ends with the decision, so a slot that comes while the tic
        still runs is fired (and recorded skipped) rather than dropped by APScheduler."""
        await self.engine.await_quietly(self.engine.spawn(self.fire()))

    async def fire(self) -> TicDecision | None:
        """A fire of the tic's schedule: the slot it stands for is decided (and started), once
        across instances; ``None`` when tics are off or the schedule names no slot."""
        plan = await self.plan()
        if not plan.enabled:
            return None
        slot = last_fire(plan.schedule, self.ports.timezone, self.clock.now(), anchor=TIC_ANCHOR)
        if slot is None:
            return None
        return await self.tic(slot=slot)

    async def catch_up(self) -> None:
        """On start: the slots passed since the newest recorded one, by the misfire rule (the
        newest run if recent, else recorded missed); nothing before the first fired tic."""
        plan = await self.plan()
        since = await self.tics.newest_slot()
        if not plan.enabled or since is None:
            return
        decision = decide_misfire(
            plan.schedule,
            self.ports.timezone,
            since=since,
            now=self.clock.now(),
            grace=self.ports.scheduler.misfire_grace,
            anchor=TIC_ANCHOR,
        )
        if isinstance(decision, RunNow | RecordMissed):
            self._caught_up = decision.fire_time  # its row may come later: the run is a task
        if isinstance(decision, RunNow):
            log.info(
                "tic catch-up: slot %s runs now (the slots since %s passed unrun)",
                decision.fire_time.isoformat(),
                decision.first_missed.isoformat(),
            )
            self.engine.spawn(self.tic(slot=decision.fire_time))
        elif isinstance(decision, RecordMissed):
            log.info("tic catch-up: slot %s recorded missed", decision.fire_time.isoformat())
            await self._record_slot(TicRunStatus.SKIPPED, MISSED, decision.fire_time)

    # --- one tic ---------------------------------------------------------------------------

    async def home_session(self) -> HomeChat:
        """The chat tics report to: ``tic.chat_id``, else the adapter's home chat.

        The adapter's home chat is a user's own chat (a chat bot's: the
        first allowed user), so its session is opened for that user.
        """
        home = self.ports.home_chat_id
        chat_id = self.ports.tic.chat_id or home
        if chat_id is None:
            raise ConfigError("tic.chat_id", "tics have no chat to report to: set tic.chat_id")
        session = await self.ports.chat_session(
            chat_id, user_id=chat_id if chat_id == home else None, language=None
        )
        assert session.id is not None
        return HomeChat(session_id=session.id, chat_id=chat_id, language=session.language_code)

    async def tic(self, *, manual: bool = False, slot: datetime | None = None) -> TicDecision:
        """Decide one tic now and start it if it should run; the decision is recorded.

        ``slot`` is the scheduled fire time a fire stands for (``None``: ``/tic now``, a deferred
        tic's run): its row is inserted once, before anything runs, and a slot found taken is
        left alone (the decision is still returned).
        """
        if self._running:
            if slot is not None:
                await self._record_slot(TicRunStatus.SKIPPED, STILL_RUNNING, slot)
            return Run()  # the tic in flight answers this one too
        home = await self.home_session()
        now = self.clock.now()
        tic_md = read_tic_md(self.ports.workdir)
        prompt = self.ports.tic.prompt
        events = await self.pending_events()
        quiet = None if manual else self.ports.quiet_hours.range
        decision = decide_tic(
            now,
            quiet,
            self.ports.timezone,
            user_turn_running=self.ports.turns.is_busy(home.session_id),
            has_work=tic_has_work(tic_md, prompt, events),
        )
        if isinstance(decision, DeferBusy):
            self._deferred_for = home.session_id  # set before any await: the turn may end meanwhile
        if not isinstance(decision, Run):
            recorded = await self._record_slot(decision.status, decision.reason, slot)
            if not recorded and isinstance(decision, DeferBusy):
                self._deferred_for = None  # the slot was decided elsewhere, its deferral too
            return decision
        self._running = True  # before any await: a fire meanwhile finds this tic running
        try:
            row = await self.tics.record(TicRunStatus.RAN, slot=slot)
        except BaseException:
            self._running = False
            raise
        if row is None:
            self._running = False
            _slot_taken(slot)
            return decision
        text = build_tic_input(
            now, self.ports.timezone, prompt=prompt, tic_md=tic_md, pending_events=events
        ).render()
        self.engine.spawn(self._run(home, text, row))  # the engine owns it: stop cancels it
        return decision

    def turn_finished(self, session_id: int) -> None:
        """A tic deferred for the home chat's turn runs once that turn is over."""
        if self._deferred_for == session_id and self.engine.aps is not None:
            self._deferred_for = None
            self.engine.spawn(self.tic())

    async def _record_slot(self, status: TicRunStatus, reason: str | None, slot: datetime | None) -> bool:
        """Record a decision that runs nothing; whether its row went in (a slot may be taken)."""
        row = await self.tics.record(status, reason=reason, slot=slot)
        if row is None:
            _slot_taken(slot)
            return False
        self._notify(row)
        return True

    async def _run(self, home: HomeChat, text: str, row: TicRun) -> None:
        """The tic's turn in a headless session of its own; its row (``ran``, open) is written."""
        tic_id = row.id
        assert tic_id is not None
        started = time.monotonic()
        try:
            try:
                session = await self.ports.sessions.create_headless(
                    SessionSource.TIC, home.chat_id, auto_deny=True
                )
                assert session.id is not None
                await self.tics.attach_session(tic_id, session.id)
                outcome = await self.turns.run(
                    session, ScheduledTurnBody(job="tic", text=text), f"tic:{tic_id}"
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("tic failed to run")
                outcome = failure(exc)
            finished = await durable(self._finish(home, tic_id, outcome))
            took = time.monotonic() - started
            log.info(
                "tic run=%s outcome=%s delivered=%s took=%.2fs",
                tic_id,
                outcome.kind,
                finished.delivered,
                took,
                extra={"tic": tic_id, "outcome": str(outcome.kind), "took": round(took, 3)},
            )
        finally:
            self._running = False
        self._notify(finished)

    async def _finish(self, home: HomeChat, tic_id: int, outcome: TurnOutcome) -> TicRun:
        """Deliver the reply unless it is ``TIC_OK`` or empty, and close the tic's row."""
        reply = outcome.text.strip() if isinstance(outcome, Final) else ""
        failed = not isinstance(outcome, Final)
        deliver = not failed and not is_tic_ok(reply)
        if deliver:
            await self._deliver(home, reply)
        reason = run_result(outcome).error if failed else None
        return await self.tics.finish(tic_id, delivered=deliver, failed=failed, reason=reason)

    async def _deliver(self, home: HomeChat, reply: str) -> None:
        """Straight to the home chat (no quiet-hours hold: a tic never runs in them unless asked for)."""
        to = address(home.session_id, SessionSource.TIC, home.chat_id, home.language)
        await self.ports.publish(Report(to=to, content=TicResult(body=ModelText(text=reply))))
        await self.ports.history.append_assistant(
            session_id=home.session_id, content=reply, is_synthetic=True
        )

    # --- records -------------------------------------------------------------------------

    async def pending_events(self) -> list[str]:
        """Finished cron runs since the last tic that called the model (all, before the first)."""
        async with self.ports.db.read() as tx:
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
        return [cron_event(run, title, self.ports.timezone) for run, title in rows]

    async def settle_open(self) -> None:
        """Tics a crash cut short (ran, never ended) are closed as failed."""
        async with self.ports.db.read() as tx:
            rows = await tx.exec(
                select(TicRun).where(TicRun.status == TicRunStatus.RAN, col(TicRun.ended_at).is_(None))
            )
            open_ids = [row.id or 0 for row in rows.all()]
        for tic_id in open_ids:
            await self.tics.finish(tic_id, delivered=False, failed=True, reason=INTERRUPTED)

    def _notify(self, row: TicRun) -> None:
        for listener in list(self.listeners):
            listener(row)


def _slot_taken(slot: datetime | None) -> None:
    log.debug(
        "tic slot %s has a row already (decided elsewhere or before a restart); not run again",
        slot.isoformat() if slot is not None else None,
    )
